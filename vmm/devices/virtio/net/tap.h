// A Linux TAP device (Documentation/networking/tuntap.rst): Ethernet frames, one per
// read(2)/write(2), with no packet-information prefix (IFF_NO_PI). The fd is non-blocking.
// A TAP this process opens carries a 12-byte struct virtio_net_hdr before each frame
// (IFF_VNET_HDR, TUNSETVNETHDRSZ 12: virtio 1.x's header, num_buffers included, which the
// kernel skips), so that checksum and segmentation offloads pass between the guest and the
// host's stack; one handed in open has the header if its opener attached it so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::virtio {

// The host side's IPv4 address, e.g. 10.99.0.1/24.
struct Ipv4Cidr {
  uint32_t address = 0;  // host byte order
  uint8_t prefix = 0;    // 0..32

  bool operator==(const Ipv4Cidr&) const = default;
};

// Parses "A.B.C.D/N" (N in 0..32).
Result<Ipv4Cidr> parse_ipv4_cidr(const std::string& text);

struct TapConfig {
  std::string name;                 // empty: the kernel picks one (tapN)
  std::optional<Ipv4Cidr> host_ip;  // set on the interface, which is then brought up
  int handed_in_fd = -1;            // a TAP already open: Tap::adopt, instead of `name`

  bool operator==(const TapConfig&) const = default;
};

class Tap {
 public:
  // Opens /dev/net/tun and attaches to (or creates) the TAP `config.name`; with host_ip,
  // gives the interface that address, turns IPv6 off on it, and brings it up. Needs
  // CAP_NET_ADMIN unless the interface exists and belongs to the caller. With
  // handed_in_fd: adopt(handed_in_fd).
  static Result<Tap> open(const TapConfig& config);

  // A TAP opened by someone else and handed to this process as `fd` (a jailed VMM's TAP,
  // which lives in the host's network namespace): checked to be a TAP without packet
  // information, made non-blocking, and duplicated (`fd` stays the caller's).
  static Result<Tap> adopt(int fd);

  // The offloads (TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6) the host's stack may use in frames
  // it gives the TAP's reader: what the guest took of the matching virtio-net features.
  static Status set_offloads(int fd, unsigned tun_flags);

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  // Whether each frame comes after a 12-byte virtio_net_hdr.
  bool vnet_header() const { return vnet_header_; }

 private:
  Tap(UniqueFd fd, std::string name, bool vnet_header)
      : fd_(std::move(fd)), name_(std::move(name)), vnet_header_(vnet_header) {}

  UniqueFd fd_;
  std::string name_;
  bool vnet_header_ = false;
};

}  // namespace dsec::virtio

// virtio-vsock packets (virtio 1.2, 5.10.6): the 44-byte little-endian header every packet
// starts with, and the checks that turn a guest's tx chain into a packet the muxer may act
// on, or write a packet into a guest's rx chain. Everything in a chain is the guest's and
// hostile: lengths, CIDs and the split of the header across descriptors.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/descriptor_chain.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio::vsock {

// The well-known CID of the host (5.10.4; VMADDR_CID_HOST).
inline constexpr uint64_t kHostCid = 2;

// struct virtio_vsock_hdr: le64 src_cid, le64 dst_cid, le32 src_port, le32 dst_port,
// le32 len, le16 type, le16 op, le32 flags, le32 buf_alloc, le32 fwd_cnt; packed.
inline constexpr uint32_t kHeaderSize = 44;
// The largest payload accepted from the guest or put in one rx packet. Linux sends at most
// 64 KiB per packet (VIRTIO_VSOCK_MAX_PKT_BUF_SIZE) and offers 4 KiB rx buffers.
inline constexpr uint32_t kMaxPayload = 64 * 1024;

inline constexpr uint16_t kTypeStream = 1;

enum Op : uint16_t {
  kOpRequest = 1,
  kOpResponse = 2,
  kOpRst = 3,
  kOpShutdown = 4,
  kOpRw = 5,
  kOpCreditUpdate = 6,
  kOpCreditRequest = 7,
};

// Flags of a SHUTDOWN packet: the sender will receive (RCV) or send (SEND) no more.
inline constexpr uint32_t kShutdownRcv = 1;
inline constexpr uint32_t kShutdownSend = 2;
inline constexpr uint32_t kShutdownBoth = kShutdownRcv | kShutdownSend;

struct VsockHeader {
  uint64_t src_cid = 0;
  uint64_t dst_cid = 0;
  uint32_t src_port = 0;
  uint32_t dst_port = 0;
  uint32_t len = 0;
  uint16_t type = 0;
  uint16_t op = 0;
  uint32_t flags = 0;
  uint32_t buf_alloc = 0;
  uint32_t fwd_cnt = 0;

  bool operator==(const VsockHeader&) const = default;
};

std::array<uint8_t, kHeaderSize> encode_header(const VsockHeader& header);
VsockHeader decode_header(std::span<const uint8_t, kHeaderSize> bytes);

// A packet the guest sent: its header and where its payload (header.len bytes) lies in
// guest memory, the readable buffers after the header's 44 bytes.
struct TxPacket {
  VsockHeader header;
  std::vector<GuestRange> payload;
};

// Reads the tx chain's packet. Fails, saying why, when:
// - the chain's readable buffers hold fewer than 44 bytes (the header);
// - header.len is above kMaxPayload, or differs from the readable bytes after the header;
// - src_cid is not `guest_cid` or dst_cid is not the host's (2): a guest may not forge
//   its address nor reach anything but the host through this device.
// A packet whose type is not STREAM is well-formed here; the muxer answers it with RST.
Result<TxPacket> parse_tx_packet(const GuestMemory& memory, const DescriptorChain& chain,
                                 uint64_t guest_cid);

// How many payload bytes an rx chain takes after the header, at most kMaxPayload. Fails if
// the chain has device-readable buffers (an rx chain is all device-writable) or its
// writable buffers hold fewer than 44 bytes.
Result<uint32_t> rx_payload_capacity(const DescriptorChain& chain);

// The host memory of the chain's writable buffers after the header's 44 bytes, `len` bytes
// at most: where a read from a host socket puts an rx packet's payload without a copy.
Result<std::vector<iovec>> rx_payload_iovecs(GuestMemory& memory, const DescriptorChain& chain,
                                             uint32_t len);

// Writes `header` into the rx chain's first 44 writable bytes. The payload, if any, is
// already in place (rx_payload_iovecs). Returns the used length: 44 + header.len.
Result<uint32_t> write_rx_header(GuestMemory& memory, const DescriptorChain& chain,
                                 const VsockHeader& header);

// Writes a whole packet, header then `data` (header.len is set to data.size()), into the rx
// chain. Fails as rx_payload_capacity() does, or if data does not fit.
Result<uint32_t> write_rx_packet(GuestMemory& memory, const DescriptorChain& chain,
                                 VsockHeader header, std::span<const uint8_t> data);

}  // namespace dsec::virtio::vsock

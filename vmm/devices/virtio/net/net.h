// virtio-net (virtio 1.2, 5.1) on a host TAP device (tap.h): one rx (0) and one tx (1)
// queue, no control queue. The configuration space is the MAC address and the link status
// (always up). With VIRTIO_F_VERSION_1 every frame on either queue comes after a 12-byte
// struct virtio_net_hdr (num_buffers included).
//
// Offloads: on a TAP that carries the same header (IFF_VNET_HDR, as Tap::open opens it),
// the header passes through both ways, and the device offers checksum offload and TCP
// segmentation both ways (CSUM, HOST_TSO4/6; GUEST_CSUM, GUEST_TSO4/6): the guest sends
// frames of up to 64 KiB that the host's stack segments, and gets the host's large frames
// whole when it gives big enough rx buffers. Whatever the guest puts in a tx header, the
// host's kernel checks (tun's virtio_net_hdr_to_skb) and drops what is malformed. What the
// guest took of the GUEST_* features sets the TAP's offloads (TUNSETOFFLOAD), on the loop
// thread after activation. On an fd without the header (a TAP handed in without it, or a
// socket in tests) the device offers no offloads, sends frames without the header, and
// gives every received frame a zeroed header with num_buffers 1.
//
// Threading: all the device's work runs on the VM's event loop, under the device's lock:
// the TAP fd is watched there, and notify() from the loop thread (the machine's ioeventfd
// handlers) serves the queue at once. A notify() from any other thread (a vCPU's
// QueueNotify write that bypassed the ioeventfd) is passed to the loop
// (loop_dispatch.h). activate() and reset() may come from a vCPU thread. When the guest
// has no rx buffer, the device keeps the frame it read, stops watching the TAP (so the
// kernel queues, then drops, what follows), and resumes when the guest notifies the rx
// queue. The same happens when the rx rate limiter is out of tokens, until its timer on
// the loop fires; the tx rate limiter leaves the guest's frames in the tx ring meanwhile.
// The loop and the guest memory must outlive the device, and the device must be destroyed
// on the loop thread or while the loop is not running.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/device_metrics.h"
#include "vmm/devices/rate_limiter.h"
#include "vmm/devices/virtio/loop_dispatch.h"
#include "vmm/devices/virtio/net/tap.h"
#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/io/event_loop.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/mmds/net_stack.h"

namespace dsec::virtio {

// Feature bits (5.1.3).
inline constexpr unsigned kNetFeatureCsum = 0;
inline constexpr unsigned kNetFeatureGuestCsum = 1;
inline constexpr unsigned kNetFeatureMac = 5;
inline constexpr unsigned kNetFeatureGuestTso4 = 7;
inline constexpr unsigned kNetFeatureGuestTso6 = 8;
inline constexpr unsigned kNetFeatureHostTso4 = 11;
inline constexpr unsigned kNetFeatureHostTso6 = 12;
inline constexpr unsigned kNetFeatureStatus = 16;
inline constexpr uint16_t kNetStatusLinkUp = 1;

using MacAddress = std::array<uint8_t, 6>;

// Parses "aa:bb:cc:dd:ee:ff".
Result<MacAddress> parse_mac(const std::string& text);
std::string format_mac(const MacAddress& mac);

// Firecracker's rx_rate_limiter and tx_rate_limiter: each frame is one op, and its bytes
// (the Ethernet frame, without the virtio header) its bandwidth.
struct NetRateLimiters {
  devices::RateLimiterConfig rx{};
  devices::RateLimiterConfig tx{};
};

// How the device's fd frames what it carries: each frame alone, or after a 12-byte
// virtio_net_hdr, with a way to set the host's offloads (Tap::set_offloads on a TAP).
struct FrameFormat {
  bool vnet_header = false;
  std::function<Status(unsigned tun_flags)> set_offloads;
};

// The TAP offloads (TUN_F_*) that the guest's accepted features allow the host to use.
unsigned tap_offloads_for(uint64_t guest_features);

class VirtioNet final : public VirtioDevice {
 public:
  static constexpr uint16_t kRxQueue = 0;
  static constexpr uint16_t kTxQueue = 1;
  static constexpr uint16_t kQueueSize = 256;
  static constexpr uint64_t kConfigSize = 8;   // u8 mac[6]; le16 status
  static constexpr uint32_t kHeaderSize = 12;  // struct virtio_net_hdr with num_buffers
  // The largest frame either way: 64 KiB plus an Ethernet and a VLAN header.
  static constexpr uint32_t kMaxFrameSize = 65550;
  // What one read from the fd may hold: a header and the largest frame, and a little more,
  // so that a read that fills it is known to be a frame too big.
  static constexpr uint32_t kReadBufferSize = kHeaderSize + kMaxFrameSize + 64;

  // Opens (or creates) the TAP and registers the device's watches on `loop`: call it on
  // the loop's thread, or before the loop runs.
  static Result<std::unique_ptr<VirtioNet>> create(const TapConfig& tap, const MacAddress& mac,
                                                   GuestMemory& memory, io::EventLoop& loop,
                                                   const NetRateLimiters& limiters = {});
  // The same on an fd already open that carries one Ethernet frame per read and write,
  // non-blocking (a TAP, or in tests a SOCK_SEQPACKET socket).
  // With `format.vnet_header`, each frame comes after a 12-byte virtio_net_hdr.
  static Result<std::unique_ptr<VirtioNet>> create_on_fd(UniqueFd fd, const MacAddress& mac,
                                                         GuestMemory& memory, io::EventLoop& loop,
                                                         const NetRateLimiters& limiters = {},
                                                         FrameFormat format = {});
  ~VirtioNet() override;
  VirtioNet(const VirtioNet&) = delete;
  VirtioNet& operator=(const VirtioNet&) = delete;

  uint32_t device_type() const override { return kDeviceIdNet; }
  uint64_t features() const override;
  std::vector<uint16_t> queue_max_sizes() const override { return {kQueueSize, kQueueSize}; }
  void read_config(uint64_t offset, std::span<uint8_t> data) const override;
  void write_config(uint64_t, std::span<const uint8_t>) override {}  // mac is read-only
  Status activate(std::span<VirtQueue> queues, uint64_t features,
                  std::shared_ptr<VirtioInterrupt> interrupt) override;
  void reset() override;
  void notify(uint16_t queue) override;

  const MacAddress& mac() const { return mac_; }
  // Frames the guest sends to the MMDS address go to `stack` instead of the TAP, and its
  // answers come ahead of the TAP's frames (mmds/net_stack.h). Before activate().
  void set_mmds(std::unique_ptr<mmds::NetStack> stack) { mmds_ = std::move(stack); }
  // New rate limiters (Firecracker's PATCH /network-interfaces/{id}), in force from the
  // next frame; frames the old ones held back go now if the new ones let them. On the
  // loop's thread.
  void set_rate_limiters(const NetRateLimiters& limiters);
  // What the device counted (any thread may read it).
  const std::shared_ptr<devices::NetMetrics>& metrics() const { return metrics_; }

 private:
  VirtioNet(UniqueFd fd, const MacAddress& mac, GuestMemory& memory, io::EventLoop& loop,
            FrameFormat format);

  // On the loop thread.
  void on_tap_readable();
  // A rate limiter's timer: serves `queue` again.
  void on_tokens(uint16_t queue);
  // With mutex_ held, on the loop thread.
  void serve(uint16_t queue);
  void process_tx();
  // One tx chain's frame to the TAP. Returns the used length (0: nothing written), or an
  // Error for a chain that is no frame, which breaks the queue.
  Result<uint32_t> send_frame(const DescriptorChain& chain);
  void process_rx();
  // The next frame for the guest into frame_ (its header first): the MMDS stack's, else
  // the TAP's. False when neither has one.
  bool take_frame();
  // Reads one frame from the fd into frame_; false when none is there.
  bool read_frame();
  // The offloads the last activation asked for, set on the TAP (on the loop thread: the
  // vCPU threads' seccomp filter has no TAP ioctl).
  void apply_pending_offloads();
  // With MMDS: the chain's frame gathered into tx_scratch_ (its checksum completed where
  // the guest left that to the device); true when the MMDS took it.
  Result<bool> detour_to_mmds(const DescriptorChain& chain);
  void watch_tap();
  void unwatch_tap();
  void report_broken(const Error& error);
  // With mutex_ held, or before the device is shared.
  void replace_limiters(const NetRateLimiters& limiters);

  UniqueFd fd_;
  const FrameFormat format_;
  const MacAddress mac_;
  GuestMemory& memory_;
  io::EventLoop& loop_;
  std::optional<io::WatchId> tap_watch_;  // absent while rx waits for guest buffers

  std::mutex mutex_;
  std::unique_ptr<LoopDispatch> dispatch_;
  std::span<VirtQueue> queues_;
  std::shared_ptr<VirtioInterrupt> interrupt_;
  // A frame read from the TAP, not yet delivered: its virtio_net_hdr (the TAP's, or zeros),
  // num_buffers set to 1, then frame_len_ bytes of the frame.
  std::vector<uint8_t> frame_;
  size_t frame_len_ = 0;
  std::optional<unsigned> pending_offloads_;
  bool rx_header_passes_ = false;  // the TAP's header goes to the guest as it is
  bool frame_pending_ = false;
  std::vector<uint8_t> tx_scratch_;
  std::unique_ptr<mmds::NetStack> mmds_;
  LogRateLimiter log_limiter_;
  std::optional<devices::LoopRateLimiter> rx_limiter_;  // with a limit configured
  std::optional<devices::LoopRateLimiter> tx_limiter_;
  const std::shared_ptr<devices::NetMetrics> metrics_ = std::make_shared<devices::NetMetrics>();
};

}  // namespace dsec::virtio

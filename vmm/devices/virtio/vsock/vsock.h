// virtio-vsock (virtio 1.2, 5.10) with Firecracker's host side: streams between the guest
// and Unix sockets (muxer.h). Three queues: rx (0) for packets to the guest, tx (1) for
// the guest's packets, event (2) for transport events; the configuration space is the
// guest's CID (le64).
//
// Threading: all the device's work runs on the VM's event loop, under the device's lock:
// the host sockets and timers are watched there, and notify() from the loop thread (the
// machine's ioeventfd handlers) serves the queue at once. A notify() from any other thread
// (a vCPU's QueueNotify write that bypassed the ioeventfd) is passed to the loop
// (loop_dispatch.h), so that a vCPU thread never does socket I/O. activate() and
// reset() may come from a vCPU thread; reset() leaves the closing of the host sockets to
// the loop. The loop and the guest memory must outlive the device, and the device must be
// destroyed on the loop thread or while the loop is not running.
//
// Snapshots: what the guest can see of the device is the CID (config space) and the
// queues (the transport's QueueState). Streams are not saved: quiesce() gives back a held
// rx chain, ends every stream and sends the guest VIRTIO_VSOCK_EVENT_TRANSPORT_RESET, so
// that the snapshot's guest (and the running one) drops its connections, keeps its
// listeners and re-reads its CID, which a restore may therefore change. Until the guest
// has taken that event (it gives the event buffer back), nothing goes to its rx queue, or
// a new host connection could reach it before the reset and be dropped by it
// (Firecracker issues 5882 and 6100). The counter of host-side ports is saved, so that a
// clone does not reuse a port its guest still remembers (Firecracker 5688).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/devices/device_metrics.h"
#include "vmm/devices/virtio/loop_dispatch.h"
#include "vmm/devices/virtio/virtio_device.h"
#include "vmm/devices/virtio/vsock/muxer.h"
#include "vmm/io/event_loop.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// Feature bit (5.10.3): stream sockets. A driver that negotiates no type bit gets streams
// anyway, as before virtio 1.2.
inline constexpr unsigned kVsockFeatureStream = 0;

class VirtioVsock final : public VirtioDevice {
 public:
  static constexpr uint16_t kRxQueue = 0;
  static constexpr uint16_t kTxQueue = 1;
  static constexpr uint16_t kEventQueue = 2;
  static constexpr uint16_t kQueueSize = 256;
  static constexpr uint16_t kEventQueueSize = 64;
  static constexpr uint64_t kConfigSize = 8;  // le64 guest_cid
  static constexpr std::chrono::milliseconds kResetAckTimeout{2000};

  // Listens on `uds_path` (which must not exist yet) and registers the device's watches on
  // `loop`: call it on the loop's thread, or before the loop runs. `guest_cid` must be in
  // [3, 2^32 - 2]: 0-2 are reserved and -1 is VMADDR_CID_ANY.
  static Result<std::unique_ptr<VirtioVsock>> create(uint64_t guest_cid,
                                                     const std::string& uds_path,
                                                     GuestMemory& memory, io::EventLoop& loop);
  ~VirtioVsock() override;
  VirtioVsock(const VirtioVsock&) = delete;
  VirtioVsock& operator=(const VirtioVsock&) = delete;

  uint32_t device_type() const override { return kDeviceIdVsock; }
  uint64_t features() const override;
  std::vector<uint16_t> queue_max_sizes() const override {
    return {kQueueSize, kQueueSize, kEventQueueSize};
  }
  void read_config(uint64_t offset, std::span<uint8_t> data) const override;
  void write_config(uint64_t, std::span<const uint8_t>) override {}  // guest_cid is read-only
  Status activate(std::span<VirtQueue> queues, uint64_t features,
                  std::shared_ptr<VirtioInterrupt> interrupt) override;
  void reset() override;
  void notify(uint16_t queue) override;
  std::string describe_state() const override;
  bool quiesce() override;
  void resume_after_quiesce() override;
  std::vector<uint8_t> save_state() const override;
  Status restore_state(std::span<const uint8_t> bytes) override;

  uint64_t guest_cid() const { return guest_cid_; }
  const std::string& uds_path() const;
  // A restored device admits only its own process's host connections (the clone sync's)
  // until this is called: the others, held until then, go through. On the loop thread.
  void admit_every_connection();
  // Streams open now (host- and guest-initiated).
  size_t connection_count() const;
  // Memory the streams hold for host sockets now (vsock::Muxer::kMaxBufferedForHosts).
  size_t buffered_for_hosts() const;
  // What the device counted (any thread may read it).
  const std::shared_ptr<devices::VsockMetrics>& metrics() const { return metrics_; }

 private:
  VirtioVsock(uint64_t guest_cid, GuestMemory& memory, io::EventLoop& loop);

  // With mutex_ held, on the loop thread.
  void purge_if_reset();
  void serve(uint16_t queue);
  void process_tx();
  // One tx chain: its packet to the muxer. Returns the used length (0: nothing written).
  Result<uint32_t> forward_tx(const DescriptorChain& chain);
  void process_rx();
  void signal_used(VirtQueue& queue);
  void report_broken(const Error& error);
  // The transport reset of a snapshot: into the event queue; false if it has no buffer.
  bool send_transport_reset();
  // Whether rx may flow: no reset event is waiting for the guest to take it.
  bool reset_taken();

  const uint64_t guest_cid_;
  GuestMemory& memory_;
  io::EventLoop& loop_;

  mutable std::mutex mutex_;
  std::unique_ptr<LoopDispatch> dispatch_;
  std::unique_ptr<vsock::Muxer> muxer_;
  std::span<VirtQueue> queues_;
  std::shared_ptr<VirtioInterrupt> interrupt_;
  bool purge_pending_ = false;  // reset() ended streams whose sockets the loop must close
  // An rx chain popped for a packet that turned out not to be owed (the host socket had
  // nothing after all): the next packet goes there.
  std::optional<DescriptorChain> held_rx_;
  // A transport reset sent (or, after a restore, sent by the snapshot) that the guest has
  // not taken yet: the event queue's avail idx when it was sent, which moves once the
  // driver gives the buffer back. Until then rx waits, re-checked by a short timer, for
  // at most kResetAckTimeout.
  std::optional<uint16_t> reset_event_avail_;
  std::chrono::steady_clock::time_point reset_ack_deadline_;
  std::optional<io::TimerId> reset_poll_;
  LogRateLimiter log_limiter_;
  const std::shared_ptr<devices::VsockMetrics> metrics_ = std::make_shared<devices::VsockMetrics>();
};

}  // namespace dsec::virtio

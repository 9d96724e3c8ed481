#include "vmm/devices/virtio/vsock/vsock.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "vmm/devices/virtio/chain_buffers.h"
#include "vmm/devices/virtio/device_signals.h"
#include "vmm/devices/virtio/vsock/packet.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::virtio {

VirtioVsock::VirtioVsock(uint64_t guest_cid, GuestMemory& memory, io::EventLoop& loop)
    : guest_cid_(guest_cid), memory_(memory), loop_(loop) {}

Result<std::unique_ptr<VirtioVsock>> VirtioVsock::create(uint64_t guest_cid,
                                                         const std::string& uds_path,
                                                         GuestMemory& memory, io::EventLoop& loop) {
  if (guest_cid <= vsock::kHostCid || guest_cid >= UINT32_MAX) {
    return fail("vsock: guest CID " + std::to_string(guest_cid) + " is reserved or too large",
                "choose a CID from 3 to 4294967294");
  }
  std::unique_ptr<VirtioVsock> device(new VirtioVsock(guest_cid, memory, loop));
  VirtioVsock* self = device.get();
  device->dispatch_ = DSEC_TRY(LoopDispatch::create(
      loop, device->mutex_, [self](uint16_t queue) { self->serve(queue); },
      [self] { self->purge_if_reset(); }));
  device->muxer_ = DSEC_TRY(vsock::Muxer::create(loop, uds_path, guest_cid, device->mutex_, [self] {
    self->dispatch_->on_loop_thread();
    self->process_rx();
  }));
  return device;
}

VirtioVsock::~VirtioVsock() {
  dispatch_.reset();
  const std::lock_guard lock(mutex_);
  if (reset_poll_) {
    (void)loop_.cancel_timer(*reset_poll_);
  }
  muxer_.reset();
}

uint64_t VirtioVsock::features() const {
  // VirtQueue::pop() handles indirect descriptors and event idx.
  return feature_bit(kVsockFeatureStream) | feature_bit(kFeatureIndirectDesc) |
         feature_bit(kFeatureEventIdx);
}

void VirtioVsock::read_config(uint64_t offset, std::span<uint8_t> data) const {
  std::array<uint8_t, kConfigSize> config{};
  std::memcpy(config.data(), &guest_cid_, sizeof(guest_cid_));  // le64 on a little-endian host
  copy_config(config, offset, data);
}

Status VirtioVsock::activate(std::span<VirtQueue> queues, uint64_t /*features*/,
                             std::shared_ptr<VirtioInterrupt> interrupt) {
  if (queues.size() != 3) {
    return fail("virtio-vsock: activated with " + std::to_string(queues.size()) +
                " queues instead of 3");
  }
  const std::lock_guard lock(mutex_);
  queues_ = queues;
  interrupt_ = std::move(interrupt);
  held_rx_.reset();
  muxer_->activate();
  return ok();
}

void VirtioVsock::reset() {
  {
    const std::lock_guard lock(mutex_);
    queues_ = {};
    interrupt_.reset();
    held_rx_.reset();
    dispatch_->clear();
    muxer_->deactivate();
    purge_pending_ = true;
  }
  dispatch_->wake();
}

void VirtioVsock::notify(uint16_t queue) {
  if (queue < 3) {
    dispatch_->notify(queue);
  }
}

std::string VirtioVsock::describe_state() const {
  const std::lock_guard lock(mutex_);
  return muxer_->describe() + (held_rx_ ? "\nan rx buffer held for the next packet" : "");
}

const std::string& VirtioVsock::uds_path() const {
  return muxer_->uds_path();
}

size_t VirtioVsock::connection_count() const {
  const std::lock_guard lock(mutex_);
  return muxer_->connection_count();
}

size_t VirtioVsock::buffered_for_hosts() const {
  const std::lock_guard lock(mutex_);
  return muxer_->buffered_for_hosts();
}

void VirtioVsock::purge_if_reset() {
  if (purge_pending_) {
    purge_pending_ = false;
    muxer_->purge();
  }
}

void VirtioVsock::serve(uint16_t queue) {
  if (!interrupt_) {
    return;  // not active
  }
  if (queue == kTxQueue) {
    process_tx();
  }
  // Rx after tx (the guest's packets may owe it answers), and after the event queue: the
  // driver gave back buffers there, maybe the one of a transport reset that held rx.
  process_rx();
}

void VirtioVsock::process_tx() {
  serve_available_chains(queues_[kTxQueue], memory_, *interrupt_, {"virtio-vsock", log_limiter_},
                         [this](const DescriptorChain& chain) { return forward_tx(chain); });
}

Result<uint32_t> VirtioVsock::forward_tx(const DescriptorChain& chain) {
  // A malformed packet is dropped, not a broken queue: the chain goes back unread.
  if (auto packet = vsock::parse_tx_packet(memory_, chain, guest_cid_); packet) {
    metrics_->tx_packets_count.inc();
    metrics_->tx_bytes_count.add(packet->header.len);
    muxer_->on_guest_packet(memory_, *packet);
  } else if (auto held_back = log_limiter_.allow()) {
    spdlog::warn("virtio-vsock: dropped a packet: {}{}", packet.error().message(),
                 *held_back != 0 ? fmt::format(" ({} similar messages suppressed)", *held_back)
                                 : std::string());
  }
  return 0;
}

void VirtioVsock::process_rx() {
  if (!interrupt_ || !reset_taken()) {
    return;
  }
  VirtQueue& q = queues_[kRxQueue];
  bool returned = false;
  while (muxer_->has_rx()) {
    DescriptorChain chain;
    if (held_rx_) {
      chain = std::move(*held_rx_);
      held_rx_.reset();
    } else {
      auto popped = q.pop(memory_);
      if (!popped) {
        report_broken(popped.error());
        break;
      }
      std::optional<DescriptorChain>& next = *popped;
      if (!next) {
        break;  // no buffer: the driver's next rx notification brings us back
      }
      chain = std::move(*next);
    }
    auto written = muxer_->fill_rx(memory_, chain);
    if (written && *written == 0) {
      held_rx_ = std::move(chain);
      break;
    }
    if (!written) {
      if (auto held_back = log_limiter_.allow()) {
        spdlog::warn("virtio-vsock: returned an unusable rx buffer: {}", written.error().message());
      }
    }
    if (written) {
      // The used length is the header and its payload (a control packet has none).
      metrics_->rx_packets_count.inc();
      metrics_->rx_bytes_count.add(*written - std::min(*written, vsock::kHeaderSize));
    }
    if (auto added = q.add_used(memory_, chain.head, written.value_or(0)); !added) {
      report_broken(added.error());
      break;
    }
    returned = true;
  }
  if (returned) {
    signal_used(q);
  }
}

bool VirtioVsock::reset_taken() {
  if (!reset_event_avail_) {
    return true;
  }
  const auto avail = queues_[kEventQueue].driver_avail_idx(memory_);
  if ((avail && *avail != *reset_event_avail_) ||
      std::chrono::steady_clock::now() >= reset_ack_deadline_) {
    reset_event_avail_.reset();
    return true;
  }
  if (!reset_poll_) {
    // The driver need not notify for the buffer it gives back: look again shortly.
    auto timer = loop_.add_timer(std::chrono::milliseconds(2), [this] {
      const std::lock_guard lock(mutex_);
      reset_poll_.reset();
      process_rx();
    });
    if (timer) {
      reset_poll_ = *timer;
    }
  }
  return false;
}

bool VirtioVsock::send_transport_reset() {
  VirtQueue& q = queues_[kEventQueue];
  auto popped = q.pop(memory_);
  if (!popped) {
    return false;
  }
  const std::optional<DescriptorChain>& next = *popped;
  if (!next.has_value()) {
    return false;
  }
  const DescriptorChain& chain = *next;
  // struct virtio_vsock_event { le32 id; }: VIRTIO_VSOCK_EVENT_TRANSPORT_RESET is 0.
  const std::array<uint8_t, 4> event{};
  const bool written = write_buffers(memory_, chain.writable, event).has_value();
  if (auto added = q.add_used(memory_, chain.head, written ? 4 : 0); !added) {
    report_broken(added.error());
    return false;
  }
  signal_used(q);
  return written;
}

bool VirtioVsock::quiesce() {
  const std::lock_guard lock(mutex_);
  if (!interrupt_) {
    return true;  // not active: nothing the guest could see
  }
  if (held_rx_) {
    // The chain was the last one popped from rx: give it back to the ring.
    --queues_[kRxQueue].state().next_avail;
    held_rx_.reset();
  }
  muxer_->deactivate();
  muxer_->purge();
  if (!reset_event_avail_) {
    const auto avail = queues_[kEventQueue].driver_avail_idx(memory_);
    if (send_transport_reset() && avail) {
      reset_event_avail_ = *avail;
      reset_ack_deadline_ = std::chrono::steady_clock::now() + kResetAckTimeout;
    } else {
      spdlog::warn(
          "virtio-vsock: the guest has no event buffer for the transport reset of a snapshot: "
          "its connections will not be reset");
    }
  }
  return true;
}

void VirtioVsock::resume_after_quiesce() {
  const std::lock_guard lock(mutex_);
  if (interrupt_) {
    reset_ack_deadline_ = std::chrono::steady_clock::now() + kResetAckTimeout;
    muxer_->activate();
  }
}

std::vector<uint8_t> VirtioVsock::save_state() const {
  const std::lock_guard lock(mutex_);
  snapshot::ByteWriter out;
  out.put(muxer_->next_local_port());
  out.put<uint8_t>(reset_event_avail_ ? 1 : 0);
  out.put<uint16_t>(reset_event_avail_.value_or(0));
  return out.take();
}

Status VirtioVsock::restore_state(std::span<const uint8_t> bytes) {
  snapshot::ByteReader in(bytes);
  const auto port = DSEC_TRY(in.get<uint32_t>("virtio-vsock local port counter"));
  const auto awaiting = DSEC_TRY(in.get<uint8_t>("virtio-vsock reset flag"));
  const auto avail = DSEC_TRY(in.get<uint16_t>("virtio-vsock reset event index"));
  DSEC_TRY(in.expect_end("virtio-vsock state"));
  const std::lock_guard lock(mutex_);
  muxer_->set_next_local_port(port);
  // No host process but this one (its clone sync) reaches the clone's agent before the
  // guest has fresh entropy: another clone of this snapshot would draw the same numbers.
  muxer_->admit_only_own_connections(true);
  if (awaiting != 0) {
    reset_event_avail_ = avail;
    // Counted from the restore: the clone's guest has not run since.
    reset_ack_deadline_ = std::chrono::steady_clock::now() + kResetAckTimeout;
  }
  return ok();
}

void VirtioVsock::admit_every_connection() {
  const std::lock_guard lock(mutex_);
  muxer_->admit_only_own_connections(false);
}

void VirtioVsock::signal_used(VirtQueue& queue) {
  signal_used_if_wanted(queue, memory_, *interrupt_);
}

void VirtioVsock::report_broken(const Error& error) {
  report_broken_queue(*interrupt_, log_limiter_, "virtio-vsock", error);
}

}  // namespace dsec::virtio

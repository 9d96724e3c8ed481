#include "vmm/devices/virtio/vsock/vsock.h"

#include <spdlog/spdlog.h>

#include <array>
#include <cstring>

#include "vmm/devices/virtio/device_signals.h"
#include "vmm/devices/virtio/vsock/packet.h"

namespace dsec::virtio {

VirtioVsock::VirtioVsock(uint64_t guest_cid, GuestMemory& memory)
    : guest_cid_(guest_cid), memory_(memory) {}

Result<std::unique_ptr<VirtioVsock>> VirtioVsock::create(uint64_t guest_cid,
                                                         const std::string& uds_path,
                                                         GuestMemory& memory, io::EventLoop& loop) {
  if (guest_cid <= vsock::kHostCid || guest_cid >= UINT32_MAX) {
    return fail("vsock: guest CID " + std::to_string(guest_cid) + " is reserved or too large",
                "choose a CID from 3 to 4294967294");
  }
  std::unique_ptr<VirtioVsock> device(new VirtioVsock(guest_cid, memory));
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
  switch (queue) {
    case kTxQueue:
      process_tx();
      [[fallthrough]];
    case kRxQueue:
      process_rx();
      break;
    default:
      // The event queue holds the driver's buffers for transport events, which this
      // device sends none of yet.
      break;
  }
}

void VirtioVsock::process_tx() {
  serve_available_chains(queues_[kTxQueue], memory_, *interrupt_, {"virtio-vsock", log_limiter_},
                         [this](const DescriptorChain& chain) { return forward_tx(chain); });
}

Result<uint32_t> VirtioVsock::forward_tx(const DescriptorChain& chain) {
  // A malformed packet is dropped, not a broken queue: the chain goes back unread.
  if (auto packet = vsock::parse_tx_packet(memory_, chain, guest_cid_); packet) {
    muxer_->on_guest_packet(memory_, *packet);
  } else if (auto held_back = log_limiter_.allow()) {
    spdlog::warn("virtio-vsock: dropped a packet: {}{}", packet.error().message(),
                 *held_back != 0 ? fmt::format(" ({} similar messages suppressed)", *held_back)
                                 : std::string());
  }
  return 0;
}

void VirtioVsock::process_rx() {
  if (!interrupt_) {
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

void VirtioVsock::signal_used(VirtQueue& queue) {
  signal_used_if_wanted(queue, memory_, *interrupt_);
}

void VirtioVsock::report_broken(const Error& error) {
  report_broken_queue(*interrupt_, log_limiter_, "virtio-vsock", error);
}

}  // namespace dsec::virtio

#include "vmm/devices/virtio/mmio_transport.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "vmm/devices/virtio/virtio_spec.h"

namespace dsec::virtio {
namespace {

constexpr uint32_t kDriverStatusBits =
    kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk | kStatusFailed;

uint32_t low_half(uint64_t value) {
  return static_cast<uint32_t>(value);
}
uint32_t high_half(uint64_t value) {
  return static_cast<uint32_t>(value >> 32);
}
void set_low_half(uint64_t& target, uint32_t value) {
  target = (target & 0xffff'ffff'0000'0000) | value;
}
void set_high_half(uint64_t& target, uint32_t value) {
  target = (target & 0x0000'0000'ffff'ffff) | (uint64_t{value} << 32);
}

// QueueDesc/Driver/Device Low and High: each address is written as two 32-bit halves.
void set_ring_address_half(QueueState& queue, uint64_t offset, uint32_t value) {
  uint64_t& address = offset < mmio::kQueueDriverLow   ? queue.desc_table
                      : offset < mmio::kQueueDeviceLow ? queue.avail_ring
                                                       : queue.used_ring;
  if (offset % 8 == 0) {
    set_low_half(address, value);
  } else {
    set_high_half(address, value);
  }
}

// The bits a status bit needs to be set already (3.1.1, "Device Initialization").
uint32_t prerequisites(uint32_t bit) {
  switch (bit) {
    case kStatusDriver:
      return kStatusAcknowledge;
    case kStatusFeaturesOk:
      return kStatusAcknowledge | kStatusDriver;
    case kStatusDriverOk:
      return kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk;
    default:
      return 0;
  }
}

}  // namespace

Result<std::unique_ptr<MmioTransport>> MmioTransport::create(GuestMemory& memory,
                                                             std::unique_ptr<VirtioDevice> device,
                                                             VirtioInterrupt::Line interrupt_line) {
  if (!device) {
    return fail("virtio-mmio transport: no device");
  }
  const std::vector<uint16_t> max_sizes = device->queue_max_sizes();
  if (max_sizes.empty()) {
    return fail(fmt::format("virtio device type {} has no queues", device->device_type()));
  }
  std::vector<VirtQueue> queues;
  queues.reserve(max_sizes.size());
  for (size_t i = 0; i < max_sizes.size(); ++i) {
    auto queue = VirtQueue::create(max_sizes[i]);
    if (!queue) {
      return std::unexpected(queue.error().with_context(
          fmt::format("virtio device type {} queue {}", device->device_type(), i)));
    }
    queues.push_back(*queue);
  }
  return std::unique_ptr<MmioTransport>(
      new MmioTransport(memory, std::move(device), std::move(queues), std::move(interrupt_line)));
}

MmioTransport::MmioTransport(GuestMemory& memory, std::unique_ptr<VirtioDevice> device,
                             std::vector<VirtQueue> queues, VirtioInterrupt::Line interrupt_line)
    : memory_(memory),
      device_(std::move(device)),
      device_features_(device_->features() | feature_bit(kFeatureVersion1)),
      interrupt_(std::make_shared<VirtioInterrupt>(std::move(interrupt_line))),
      queues_(std::move(queues)) {}

void MmioTransport::read(uint64_t offset, std::span<uint8_t> data) {
  std::ranges::fill(data, uint8_t{0});
  const std::lock_guard lock(mutex_);
  if (offset >= mmio::kConfig) {
    device_->read_config(offset - mmio::kConfig, data);
    return;
  }
  if (data.size() != sizeof(uint32_t) || offset % sizeof(uint32_t) != 0) {
    return;
  }
  const uint32_t value = read_register(offset);
  std::memcpy(data.data(), &value, sizeof(value));
}

void MmioTransport::write(uint64_t offset, std::span<const uint8_t> data) {
  const std::lock_guard lock(mutex_);
  if (offset >= mmio::kConfig) {
    // Taken in any state: what a write means, and when, is the device's business.
    device_->write_config(offset - mmio::kConfig, data);
    return;
  }
  if (data.size() != sizeof(uint32_t) || offset % sizeof(uint32_t) != 0) {
    return;
  }
  uint32_t value = 0;
  std::memcpy(&value, data.data(), sizeof(value));
  write_register(offset, value);
}

uint32_t MmioTransport::read_register(uint64_t offset) const {
  const VirtQueue* queue = selected_queue();
  switch (offset) {
    case mmio::kMagicValue:
      return mmio::kMagic;
    case mmio::kVersion:
      return mmio::kVersion2;
    case mmio::kDeviceId:
      return device_->device_type();
    case mmio::kVendorId:
      return mmio::kDsecVendorId;
    case mmio::kDeviceFeatures:
      switch (device_features_sel_) {
        case 0:
          return low_half(device_features_);
        case 1:
          return high_half(device_features_);
        default:
          return 0;
      }
    case mmio::kQueueNumMax:
      return queue != nullptr ? queue->max_size() : 0;
    case mmio::kQueueReady:
      return queue != nullptr && queue->state().ready ? 1 : 0;
    case mmio::kInterruptStatus:
      return interrupt_->status();
    case mmio::kStatus:
      return status();
    case mmio::kShmLenLow:
    case mmio::kShmLenHigh:
    case mmio::kShmBaseLow:
    case mmio::kShmBaseHigh:
      // No shared memory regions: Linux reads a length of all-ones as "none" (4.2.2).
      return std::numeric_limits<uint32_t>::max();
    case mmio::kConfigGeneration:
      return interrupt_->config_generation();
    default:  // write-only and reserved registers
      return 0;
  }
}

void MmioTransport::write_register(uint64_t offset, uint32_t value) {
  VirtQueue* queue = queue_setup_allowed() ? selected_queue() : nullptr;
  QueueState* q = queue != nullptr ? &queue->state() : nullptr;
  switch (offset) {
    case mmio::kDeviceFeaturesSel:
      device_features_sel_ = value;
      break;
    case mmio::kDriverFeatures:
      // 3.1.1: features are written after DRIVER and before FEATURES_OK.
      if ((status_ & kStatusDriver) != 0 && (status_ & (kStatusFeaturesOk | kStatusFailed)) == 0) {
        if (driver_features_sel_ == 0) {
          set_low_half(driver_features_, value);
        } else if (driver_features_sel_ == 1) {
          set_high_half(driver_features_, value);
        }
      }
      break;
    case mmio::kDriverFeaturesSel:
      driver_features_sel_ = value;
      break;
    case mmio::kQueueSel:
      queue_sel_ = value;
      break;
    case mmio::kQueueNum:
      if (q != nullptr) {
        // A size that does not fit 16 bits becomes 0, which validate() refuses.
        q->size = value <= std::numeric_limits<uint16_t>::max() ? static_cast<uint16_t>(value) : 0;
      }
      break;
    case mmio::kQueueReady:
      if (q != nullptr) {
        q->ready = value != 0;
      }
      break;
    case mmio::kQueueNotify:
      // Without VIRTIO_F_NOTIFICATION_DATA the value is the queue index (4.2.2).
      notify_locked(value);
      break;
    case mmio::kInterruptAck:
      interrupt_->acknowledge(value);
      break;
    case mmio::kStatus:
      write_status(value);
      break;
    case mmio::kQueueDescLow:
    case mmio::kQueueDescHigh:
    case mmio::kQueueDriverLow:
    case mmio::kQueueDriverHigh:
    case mmio::kQueueDeviceLow:
    case mmio::kQueueDeviceHigh:
      if (q != nullptr) {
        set_ring_address_half(*q, offset, value);
      }
      break;
    default:  // read-only and reserved registers
      break;
  }
}

void MmioTransport::write_status(uint32_t value) {
  if (value == 0) {
    reset();
    return;
  }
  const uint32_t current = status_;
  // DEVICE_NEEDS_RESET is the device's to set; a driver writing back what it read carries it.
  value &= ~kStatusDeviceNeedsReset;
  // 2.1.2: the driver must not clear a bit; after FAILED it must reset. Unknown bits, a
  // cleared bit or a step out of order: ignore the write.
  if ((current & kStatusFailed) != 0 || (value & current) != current ||
      (value & ~kDriverStatusBits) != 0) {
    return;
  }
  if ((value & ~current & kStatusFeaturesOk) != 0 && !features_acceptable()) {
    // 3.1.1 step 6: the driver reads FEATURES_OK back to learn that we refused.
    value &= ~kStatusFeaturesOk;
  }
  const uint32_t added = value & ~current;
  for (uint32_t bit = 1; bit <= kStatusFailed; bit <<= 1) {
    if ((added & bit) != 0 && (value & prerequisites(bit)) != prerequisites(bit)) {
      return;
    }
  }
  status_ = value;
  if ((added & kStatusDriverOk) != 0) {
    activate();
  }
}

bool MmioTransport::features_acceptable() const {
  return (driver_features_ & ~device_features_) == 0 &&
         (driver_features_ & feature_bit(kFeatureVersion1)) != 0;
}

void MmioTransport::activate() {
  for (size_t i = 0; i < queues_.size(); ++i) {
    VirtQueue& queue = queues_[i];
    queue.state().event_idx = (driver_features_ & feature_bit(kFeatureEventIdx)) != 0;
    queue.state().indirect_desc = (driver_features_ & feature_bit(kFeatureIndirectDesc)) != 0;
    if (!queue.state().ready) {
      continue;
    }
    if (auto valid = queue.validate(memory_); !valid) {
      // Guest-triggered, and repeatable at will: debug level only.
      spdlog::debug("virtio device type {}: queue {}: {}; it needs a reset", device_->device_type(),
                    i, valid.error().message());
      interrupt_->signal_needs_reset();
      return;
    }
  }
  if (auto activated = device_->activate(queues_, driver_features_, interrupt_); !activated) {
    spdlog::warn("virtio device type {} failed to activate: {}", device_->device_type(),
                 activated.error().message());
    device_->reset();
    interrupt_->signal_needs_reset();
    return;
  }
  active_ = true;
}

void MmioTransport::reset() {
  device_->reset();
  active_ = false;
  for (VirtQueue& queue : queues_) {
    queue.reset();
  }
  status_ = 0;
  device_features_sel_ = 0;
  driver_features_sel_ = 0;
  driver_features_ = 0;
  queue_sel_ = 0;
  interrupt_->reset();
}

uint32_t MmioTransport::status() const {
  return status_ | (interrupt_->needs_reset() ? kStatusDeviceNeedsReset : 0);
}

bool MmioTransport::queue_setup_allowed() const {
  return (status_ & kStatusFeaturesOk) != 0 && (status_ & (kStatusDriverOk | kStatusFailed)) == 0 &&
         !interrupt_->needs_reset();
}

VirtQueue* MmioTransport::selected_queue() {
  return queue_sel_ < queues_.size() ? &queues_[queue_sel_] : nullptr;
}

const VirtQueue* MmioTransport::selected_queue() const {
  return queue_sel_ < queues_.size() ? &queues_[queue_sel_] : nullptr;
}

void MmioTransport::notify(uint32_t queue) {
  const std::lock_guard lock(mutex_);
  notify_locked(queue);
}

void MmioTransport::notify_locked(uint32_t queue) {
  if (active_ && queue < queues_.size() && queues_[queue].state().ready) {
    device_->notify(static_cast<uint16_t>(queue));
  }
}

bool MmioTransport::active() const {
  const std::lock_guard lock(mutex_);
  return active_;
}

TransportState MmioTransport::state() const {
  const std::lock_guard lock(mutex_);
  TransportState s;
  s.status = status();
  s.device_features_sel = device_features_sel_;
  s.driver_features_sel = driver_features_sel_;
  s.driver_features = driver_features_;
  s.queue_sel = queue_sel_;
  s.interrupt_status = interrupt_->status();
  s.config_generation = interrupt_->config_generation();
  s.queues.reserve(queues_.size());
  for (const VirtQueue& queue : queues_) {
    s.queues.push_back(queue.state());
  }
  return s;
}

namespace {

const char* device_type_name(uint32_t type) {
  switch (type) {
    case kDeviceIdNet:
      return "net";
    case kDeviceIdBlock:
      return "blk";
    case kDeviceIdEntropy:
      return "rng";
    case kDeviceIdBalloon:
      return "balloon";
    case kDeviceIdVsock:
      return "vsock";
    default:
      return "unknown";
  }
}

}  // namespace

std::string MmioTransport::describe() const {
  const std::lock_guard lock(mutex_);
  std::string text =
      fmt::format("virtio-{} (type {}): status {:#x}{}, interrupt status {:#x}",
                  device_type_name(device_->device_type()), device_->device_type(), status(),
                  active_ ? " (active)" : " (inactive)", interrupt_->status());
  for (size_t i = 0; i < queues_.size(); ++i) {
    text += fmt::format("\n  queue {}: {}", i, queues_[i].describe(memory_));
  }
  const std::string device = active_ ? device_->describe_state() : std::string();
  size_t start = 0;
  while (start < device.size()) {
    const size_t end = std::min(device.find('\n', start), device.size());
    text += "\n  " + device.substr(start, end - start);
    start = end + 1;
  }
  return text;
}

Status MmioTransport::restore(const TransportState& state) {
  const std::lock_guard lock(mutex_);
  reset();
  if (state.queues.size() != queues_.size()) {
    return fail(fmt::format("virtio device type {}: the saved state has {} queues, the device {}",
                            device_->device_type(), state.queues.size(), queues_.size()));
  }
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (state.queues[i].size > queues_[i].max_size()) {
      return fail(fmt::format(
          "virtio device type {}: saved queue {} has size {}, above the device's maximum {}",
          device_->device_type(), i, state.queues[i].size, queues_[i].max_size()));
    }
  }
  for (size_t i = 0; i < queues_.size(); ++i) {
    queues_[i].state() = state.queues[i];
  }
  status_ = state.status & ~kStatusDeviceNeedsReset;
  device_features_sel_ = state.device_features_sel;
  driver_features_sel_ = state.driver_features_sel;
  driver_features_ = state.driver_features;
  queue_sel_ = state.queue_sel;
  interrupt_->restore(state.interrupt_status, state.config_generation,
                      (state.status & kStatusDeviceNeedsReset) != 0);
  if ((status_ & kStatusDriverOk) != 0) {
    activate();
  }
  return ok();
}

}  // namespace dsec::virtio

#include "vmm/devices/virtio/interrupt.h"

namespace dsec::virtio {

void VirtioInterrupt::raise(uint32_t bits) {
  status_ |= bits;
  if (line_) {
    line_(true);
  }
}

void VirtioInterrupt::signal_used_buffer() {
  const std::lock_guard lock(mutex_);
  raise(kInterruptUsedBuffer);
}

void VirtioInterrupt::signal_config_change() {
  const std::lock_guard lock(mutex_);
  ++config_generation_;
  raise(kInterruptConfigChange);
}

void VirtioInterrupt::signal_needs_reset() {
  const std::lock_guard lock(mutex_);
  needs_reset_ = true;
  raise(kInterruptConfigChange);
}

uint32_t VirtioInterrupt::status() const {
  const std::lock_guard lock(mutex_);
  return status_;
}

uint32_t VirtioInterrupt::config_generation() const {
  const std::lock_guard lock(mutex_);
  return config_generation_;
}

bool VirtioInterrupt::needs_reset() const {
  const std::lock_guard lock(mutex_);
  return needs_reset_;
}

void VirtioInterrupt::acknowledge(uint32_t bits) {
  const std::lock_guard lock(mutex_);
  const uint32_t before = status_;
  status_ &= ~bits;
  if (before != 0 && status_ == 0 && line_) {
    line_(false);
  }
}

void VirtioInterrupt::reset() {
  const std::lock_guard lock(mutex_);
  const uint32_t before = status_;
  status_ = 0;
  needs_reset_ = false;
  if (before != 0 && line_) {
    line_(false);
  }
}

void VirtioInterrupt::restore(uint32_t status, uint32_t config_generation, bool needs_reset) {
  const std::lock_guard lock(mutex_);
  status_ = status & (kInterruptUsedBuffer | kInterruptConfigChange);
  config_generation_ = config_generation;
  needs_reset_ = needs_reset;
}

}  // namespace dsec::virtio

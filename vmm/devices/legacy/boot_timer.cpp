#include "vmm/devices/legacy/boot_timer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace dsec::devices {

BootTimer::BootTimer(Clock::time_point start, BootHandler on_boot)
    : start_(start), on_boot_(std::move(on_boot)) {}

void BootTimer::read(uint64_t /*offset*/, std::span<uint8_t> data) {
  std::ranges::fill(data, uint8_t{0});
}

void BootTimer::write(uint64_t /*offset*/, std::span<const uint8_t> data) {
  if (data.empty()) {
    return;
  }
  if (data[0] == DSEC_BOOT_TIMER_SHUTDOWN_VALUE) {
    const std::lock_guard lock(mutex_);
    shutdown_announced_ = true;
    return;
  }
  if (data[0] != DSEC_BOOT_TIMER_VALUE) {
    return;
  }
  const Clock::duration elapsed = Clock::now() - start_;
  {
    const std::lock_guard lock(mutex_);
    if (boot_time_.has_value()) {
      return;
    }
    boot_time_ = elapsed;
  }
  spdlog::info("guest reached userspace after {:.1f} ms",
               std::chrono::duration<double, std::milli>(elapsed).count());
  if (on_boot_) {
    on_boot_(elapsed);
  }
}

bool BootTimer::shutdown_announced() const {
  const std::lock_guard lock(mutex_);
  return shutdown_announced_;
}

std::optional<BootTimer::Clock::duration> BootTimer::boot_time() const {
  const std::lock_guard lock(mutex_);
  return boot_time_;
}

}  // namespace dsec::devices

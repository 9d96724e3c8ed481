// The boot timer: the guest's init writes one byte to port 0x440 when userspace is up, and
// the VMM records how long that took (docs/boot-timer.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>

#include "guest/init/boot_timer.h"
#include "vmm/devices/bus_device.h"

namespace dsec::devices {

// Map it at [0x440, 0x441).
inline constexpr uint16_t kBootTimerPort = DSEC_BOOT_TIMER_PORT;
inline constexpr uint64_t kBootTimerRegisterCount = 1;

// The first write of DSEC_BOOT_TIMER_VALUE records the time elapsed since `start` (the
// VMM's start, or the VM's), logs "guest reached userspace after X ms" and calls on_boot
// once, without the timer's lock held. A write of DSEC_BOOT_TIMER_SHUTDOWN_VALUE records
// that the guest announced a clean reboot. Other writes are ignored; reads return zeros.
// Thread-safe: if vCPUs race, exactly one write counts.
class BootTimer final : public BusDevice {
 public:
  using Clock = std::chrono::steady_clock;
  using BootHandler = std::function<void(Clock::duration since_start)>;

  explicit BootTimer(Clock::time_point start, BootHandler on_boot = {});

  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

  // The time from start to the guest's first write, once it happened.
  std::optional<Clock::duration> boot_time() const;
  bool shutdown_announced() const;

 private:
  const Clock::time_point start_;
  const BootHandler on_boot_;
  mutable std::mutex mutex_;
  std::optional<Clock::duration> boot_time_;
  bool shutdown_announced_ = false;
};

}  // namespace dsec::devices

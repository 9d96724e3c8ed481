// The CMOS RAM of the PC's MC146818 RTC, at ports 0x70 (index) and 0x71 (data).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>

#include "vmm/devices/bus_device.h"

namespace dsec::devices {

// Map it at [0x70, 0x72).
inline constexpr uint16_t kCmosPort = 0x70;
inline constexpr uint64_t kCmosRegisterCount = 2;

// Why it exists: Linux writes CMOS byte 0x0f (the shutdown status, "warm reset") around the
// start of each secondary vCPU, and some paths read the RTC's status registers. Without a
// device those accesses reach no one. This is storage only: 128 bytes that read back what
// was written, with status registers that say "valid, no update in progress, no interrupt
// flags". The clock registers hold whatever the guest wrote (zero at first): the guest takes
// its wall-clock time from kvmclock, so no RTC time is kept. Neither periodic nor alarm
// interrupts exist, and bit 7 of the index (NMI disable) is ignored.
// Thread-safe: vCPU threads may access it concurrently.
class Cmos final : public BusDevice {
 public:
  Cmos();

  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

 private:
  std::mutex mutex_;
  uint8_t index_ = 0;
  std::array<uint8_t, 128> ram_{};
};

}  // namespace dsec::devices

#include "vmm/devices/legacy/cmos.h"

#include <algorithm>

#include "vmm/devices/legacy/byte_registers.h"

namespace dsec::devices {
namespace {

constexpr uint64_t kIndexPort = 0;  // 0x70
constexpr uint64_t kDataPort = 1;   // 0x71
constexpr uint8_t kIndexMask = 0x7f;

// Status registers (MC146818 datasheet).
constexpr uint8_t kRegA = 0x0a;
constexpr uint8_t kRegB = 0x0b;
constexpr uint8_t kRegC = 0x0c;
constexpr uint8_t kRegD = 0x0d;
constexpr uint8_t kRegAUpdateInProgress = 0x80;  // read-only; never set here
constexpr uint8_t kRegADefault = 0x26;           // 32.768 kHz time base, 1.024 kHz rate
constexpr uint8_t kRegBDefault = 0x02;           // 24-hour mode, BCD
constexpr uint8_t kRegDValidRam = 0x80;          // battery good: RAM and time are valid

}  // namespace

Cmos::Cmos() {
  ram_[kRegA] = kRegADefault;
  ram_[kRegB] = kRegBDefault;
  ram_[kRegD] = kRegDValidRam;
}

void Cmos::read(uint64_t offset, std::span<uint8_t> data) {
  std::ranges::fill(data, uint8_t{0xff});
  const std::lock_guard lock(mutex_);
  for_each_register(offset, data.size(), kCmosRegisterCount, [&](uint64_t reg, size_t i) {
    if (reg != kDataPort) {
      return;  // the index port is write-only
    }
    data[i] = ram_[index_];
  });
}

void Cmos::write(uint64_t offset, std::span<const uint8_t> data) {
  const std::lock_guard lock(mutex_);
  for_each_register(offset, data.size(), kCmosRegisterCount, [&](uint64_t reg, size_t i) {
    const uint8_t value = data[i];
    if (reg == kIndexPort) {
      index_ = value & kIndexMask;
    } else if (index_ == kRegA) {
      ram_[kRegA] = value & static_cast<uint8_t>(~kRegAUpdateInProgress);
    } else if (index_ != kRegC && index_ != kRegD) {  // C and D are read-only
      ram_[index_] = value;
    }
  });
}

}  // namespace dsec::devices

// A device that claims ports the guest touches harmlessly, so that the vCPU loop does not
// report them as unmapped.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "vmm/devices/bus_device.h"

namespace dsec::devices {

// Port 0x80, the POST-code port. Linux's outb_p() and inb_p() write it as a short I/O delay
// (native_io_delay). A kernel built with KVM_GUEST makes that delay a no-op once it has
// detected KVM, but code that runs earlier, and other kernels, still write it.
inline constexpr uint16_t kPostCodePort = 0x80;

// Reads return all-ones, as an empty bus does; writes are dropped. Stateless, so it is
// thread-safe and one instance may be mapped at several ranges.
class NullDevice final : public BusDevice {
 public:
  void read(uint64_t /*offset*/, std::span<uint8_t> data) override {
    std::ranges::fill(data, uint8_t{0xff});
  }
  void write(uint64_t /*offset*/, std::span<const uint8_t> /*data*/) override {}
};

}  // namespace dsec::devices

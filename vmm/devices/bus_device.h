// What a guest's port or MMIO access reaches: one device on a Bus.
#pragma once

#include <cstdint>
#include <span>

namespace dsec::devices {

// A device mapped on a Bus. `offset` is relative to the start of the range the device was
// inserted with, and the bus guarantees that [offset, offset + data.size()) lies inside it.
// `data` is as long as the guest's access: usually 1, 2, 4 or 8 bytes, but the guest chooses,
// so any length, including odd ones, must be handled without undefined behaviour.
//
// vCPU threads call read() and write() concurrently, and host threads (stdin, the event loop)
// may drive the same device: every device does its own locking.
class BusDevice {
 public:
  virtual ~BusDevice() = default;

  // Fills every byte of `data` with what the guest reads at `offset`.
  virtual void read(uint64_t offset, std::span<uint8_t> data) = 0;
  // Takes what the guest writes at `offset`.
  virtual void write(uint64_t offset, std::span<const uint8_t> data) = 0;

 protected:
  BusDevice() = default;
  BusDevice(const BusDevice&) = default;
  BusDevice& operator=(const BusDevice&) = default;
};

}  // namespace dsec::devices

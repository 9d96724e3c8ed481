// An I/O bus: guest addresses to devices. One Bus serves port I/O (16-bit ports), another MMIO.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/bus_device.h"

namespace dsec::devices {

enum class AddressSpace : uint8_t {
  kPio,   // x86 I/O ports 0x0000-0xffff
  kMmio,  // guest-physical addresses, 64-bit
};

std::string_view address_space_name(AddressSpace space);

// [base, base + size). A range may end at the very top of the address space.
struct BusRange {
  uint64_t base = 0;
  uint64_t size = 0;
};

// Built once, before any vCPU runs, then only read: the machine builder owns a mutable Bus,
// and vCPU threads get a `const Bus&`, whose read() and write() are safe to call concurrently
// (a lookup is a binary search over an immutable sorted vector; no lock). insert() must not
// run concurrently with anything else on the same Bus.
class Bus {
 public:
  explicit Bus(AddressSpace space) : space_(space) {}

  // Maps `device` at `range`. Fails on an empty range, a range outside the address space, a
  // null device, or an overlap with a range already mapped. The same device may be inserted
  // at several ranges; each sees offsets relative to its own range.
  Status insert(BusRange range, std::shared_ptr<BusDevice> device);

  // Dispatches a guest access of data.size() bytes at `address` to the device whose range
  // holds all of it, with the offset inside that range, and returns true. Returns false when
  // no single range holds the whole access (nothing mapped there, or the access crosses a
  // range's end) or data is empty; a read then yields all-ones bytes, as an empty bus does,
  // and a write is dropped. The caller decides whether to log the miss.
  bool read(uint64_t address, std::span<uint8_t> data) const;
  bool write(uint64_t address, std::span<const uint8_t> data) const;

  AddressSpace space() const { return space_; }
  size_t range_count() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t base;
    uint64_t last;  // inclusive, so that a range may end at the top of the address space
    std::shared_ptr<BusDevice> device;
  };

  // The entry whose range holds [address, address + length), or nullptr. length > 0.
  const Entry* find(uint64_t address, size_t length) const;

  AddressSpace space_;
  std::vector<Entry> entries_;  // sorted by base; ranges never overlap
};

}  // namespace dsec::devices

#include "vmm/devices/bus.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace dsec::devices {
namespace {

uint64_t last_address(AddressSpace space) {
  return space == AddressSpace::kPio ? std::numeric_limits<uint16_t>::max()
                                     : std::numeric_limits<uint64_t>::max();
}

std::string describe_range(uint64_t base, uint64_t last) {
  return fmt::format("[{:#x}, {:#x}]", base, last);
}

}  // namespace

std::string_view address_space_name(AddressSpace space) {
  return space == AddressSpace::kPio ? "PIO" : "MMIO";
}

Status Bus::insert(BusRange range, std::shared_ptr<BusDevice> device) {
  const std::string what = fmt::format("cannot map {} range at {:#x} of size {:#x}",
                                       address_space_name(space_), range.base, range.size);
  if (!device) {
    return fail(what + ": no device given");
  }
  if (range.size == 0) {
    return fail(what + ": the range is empty");
  }
  const uint64_t limit = last_address(space_);
  // last = base + size - 1 without overflow: size - 1 <= limit - base.
  if (range.base > limit || range.size - 1 > limit - range.base) {
    return fail(what + ": it ends beyond the address space",
                fmt::format("{} addresses end at {:#x}", address_space_name(space_), limit));
  }
  const uint64_t last = range.base + (range.size - 1);

  // The first entry starting after `base`; only it and the one before it can overlap.
  auto next = std::upper_bound(entries_.begin(), entries_.end(), range.base,
                               [](uint64_t base, const Entry& e) { return base < e.base; });
  const Entry* clash = nullptr;
  if (next != entries_.begin() && std::prev(next)->last >= range.base) {
    clash = &*std::prev(next);
  }
  if (clash == nullptr && next != entries_.end() && next->base <= last) {
    clash = &*next;
  }
  if (clash != nullptr) {
    return fail(
        fmt::format("{}: {} overlaps {}, which is already mapped", what,
                    describe_range(range.base, last), describe_range(clash->base, clash->last)),
        "give each device a range of its own");
  }
  entries_.insert(next, Entry{range.base, last, std::move(device)});
  return ok();
}

const Bus::Entry* Bus::find(uint64_t address, size_t length) const {
  auto next = std::upper_bound(entries_.begin(), entries_.end(), address,
                               [](uint64_t a, const Entry& e) { return a < e.base; });
  if (next == entries_.begin()) {
    return nullptr;
  }
  const Entry& entry = *std::prev(next);
  if (address > entry.last) {
    return nullptr;
  }
  // The access's last byte, address + length - 1, must not pass entry.last (no overflow).
  if (length - 1 > entry.last - address) {
    return nullptr;
  }
  return &entry;
}

bool Bus::read(uint64_t address, std::span<uint8_t> data) const {
  const Entry* entry = data.empty() ? nullptr : find(address, data.size());
  if (entry == nullptr) {
    std::ranges::fill(data, uint8_t{0xff});
    return false;
  }
  entry->device->read(address - entry->base, data);
  return true;
}

bool Bus::write(uint64_t address, std::span<const uint8_t> data) const {
  const Entry* entry = data.empty() ? nullptr : find(address, data.size());
  if (entry == nullptr) {
    return false;
  }
  entry->device->write(address - entry->base, data);
  return true;
}

}  // namespace dsec::devices

#include "vmm/arch/x86_64/e820.h"

#include <algorithm>

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

void add(std::vector<boot_e820_entry>& map, uint64_t base, uint64_t end, uint32_t type) {
  if (end > base) {
    map.push_back(boot_e820_entry{base, end - base, type});
  }
}

}  // namespace

std::vector<boot_e820_entry> e820_map(std::span<const GuestRange> ram) {
  std::vector<boot_e820_entry> map;
  for (const GuestRange& range : ram) {
    // Split around [kMpTableAddr, kHighMemStart).
    const uint64_t base = range.base;
    const uint64_t end = range.end();
    add(map, base, std::min(end, kMpTableAddr), kE820Ram);
    add(map, std::max(base, kMpTableAddr), std::min(end, kHighMemStart), kE820Reserved);
    add(map, std::max(base, kHighMemStart), end, kE820Ram);
  }
  add(map, kKvmIdentityMapAddr, kKvmPrivateEnd, kE820Reserved);
  std::sort(map.begin(), map.end(),
            [](const boot_e820_entry& a, const boot_e820_entry& b) { return a.addr < b.addr; });
  return map;
}

std::vector<boot_e820_entry> e820_map(const GuestMemory& memory) {
  std::vector<GuestRange> ram;
  for (const GuestRegion& region : memory.regions()) {
    ram.push_back(region.range());
  }
  return e820_map(ram);
}

}  // namespace dsec::x86_64

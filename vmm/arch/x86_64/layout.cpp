#include "vmm/arch/x86_64/layout.h"

#include <fmt/format.h>

#include <algorithm>

namespace dsec::x86_64 {

Result<std::vector<GuestRange>> ram_regions(uint64_t ram_bytes) {
  if (ram_bytes % kPageSize != 0 || ram_bytes <= kHighMemStart || ram_bytes > kMaxRamBytes) {
    return fail(
        fmt::format("guest memory of {} bytes: must be a multiple of 4 KiB, more than "
                    "1 MiB and at most {} TiB",
                    ram_bytes, kMaxRamBytes >> 40));
  }
  if (ram_bytes <= kMmioGapStart) {
    return std::vector<GuestRange>{{0, ram_bytes}};
  }
  return std::vector<GuestRange>{{0, kMmioGapStart}, {kMmioGapEnd, ram_bytes - kMmioGapStart}};
}

uint64_t low_ram_end(const GuestMemory& memory) {
  const auto regions = memory.regions();
  if (regions.empty() || regions.front().gpa() != 0) {
    return 0;
  }
  return std::min(regions.front().end(), kMmioGapStart);
}

}  // namespace dsec::x86_64

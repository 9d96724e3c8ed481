// What the fuzz targets over guest memory share: one GuestMemory per process (each target
// is its own executable) whose RAM regions the fuzzer's bytes fill, and check(), which
// turns a broken promise into a crash that libFuzzer reports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <source_location>
#include <span>
#include <utility>

#include "vmm/memory/guest_memory.h"

namespace dsec::fuzz {

inline void check(bool condition, std::source_location where = std::source_location::current()) {
  if (!condition) {
    std::fprintf(stderr, "fuzz check failed at %s:%u\n", where.file_name(), where.line());
    std::abort();
  }
}

// The target's guest memory over `ram`, made on the first call; later calls must pass the
// same regions.
inline GuestMemory& guest_memory(std::span<const GuestRange> ram) {
  static GuestMemory memory = std::move(GuestMemory::anonymous(ram).value());
  return memory;
}

// Zeroes each region of `ram`, then writes `contents` across them from the first region's
// base, each region taking as much as it holds. Returns what did not fit.
inline std::span<const uint8_t> fill_guest_memory(GuestMemory& memory,
                                                  std::span<const GuestRange> ram,
                                                  std::span<const uint8_t> contents) {
  for (const GuestRange& range : ram) {
    const size_t n = std::min<size_t>(contents.size(), range.size);
    check(memory.fill(range.base, range.size, 0).has_value());
    check(memory.write(range.base, contents.first(n)).has_value());
    contents = contents.subspan(n);
  }
  return contents;
}

}  // namespace dsec::fuzz

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

#include "tests/fuzz/fuzz_input.h"
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

// A write the guest makes while the device runs: u16 offset (below `limit`), u8 length,
// the bytes, clipped to `limit`.
inline void write_guest_memory(GuestMemory& memory, FuzzInput& in, uint64_t limit) {
  const uint64_t offset = in.take<uint16_t>() % limit;
  const auto bytes = in.take_bytes(in.take<uint8_t>());
  check(memory.write(offset, bytes.first(std::min<size_t>(bytes.size(), limit - offset)))
            .has_value());
}

}  // namespace dsec::fuzz

// Bounds-checked reads of structures from an untrusted file image (kernels).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

namespace dsec::x86_64 {

// True if [offset, offset + len) lies inside a buffer of `size` bytes; never overflows.
constexpr bool range_fits(uint64_t offset, uint64_t len, uint64_t size) {
  return offset <= size && len <= size - offset;
}

// A copy of the T at `offset`, or nothing if it does not fit in `bytes`. Copied, because
// file offsets carry no alignment guarantee.
template <typename T>
requires std::is_trivially_copyable_v<T> std::optional<T> read_at(std::span<const uint8_t> bytes,
                                                                  uint64_t offset) {
  if (!range_fits(offset, sizeof(T), bytes.size())) {
    return std::nullopt;
  }
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace dsec::x86_64

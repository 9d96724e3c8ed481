// Reads a fuzz input front to back, the way the targets that run a sequence of actions
// (a guest's packets, a host socket's bytes, a device's notifications) take them: small
// little-endian values and byte strings, zero or empty once the input runs out. The seed
// corpus (tests/fuzz/corpus/) is written in the same order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace dsec::fuzz {

class FuzzInput {
 public:
  explicit FuzzInput(std::span<const uint8_t> data) : data_(data) {}

  bool empty() const { return data_.empty(); }

  // The next sizeof(T) bytes as a T; missing bytes read as zero.
  template <typename T>
  requires std::is_integral_v<T> T take() {
    T value{};
    const size_t n = std::min(sizeof(T), data_.size());
    std::memcpy(&value, data_.data(), n);
    data_ = data_.subspan(n);
    return value;
  }
  // The next n bytes, or fewer at the end.
  std::span<const uint8_t> take_bytes(size_t n) {
    const auto bytes = data_.first(std::min(n, data_.size()));
    data_ = data_.subspan(bytes.size());
    return bytes;
  }
  std::span<const uint8_t> rest() { return take_bytes(data_.size()); }

 private:
  std::span<const uint8_t> data_;
};

}  // namespace dsec::fuzz

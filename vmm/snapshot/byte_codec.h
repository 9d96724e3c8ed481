// The encoding of a snapshot section's contents: little-endian integers, trivially copyable
// structs byte for byte (KVM's state structs), and length-prefixed arrays. A ByteReader never
// reads past its input and names the field it was reading when the input runs out, so a
// truncated or hostile state file fails with an error instead of reading garbage.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::snapshot {

// x86-64 only: integers and KVM's structs are written in host (little-endian) order.
static_assert(std::endian::native == std::endian::little);

class ByteWriter {
 public:
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void put(const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(std::span<const uint8_t> data) {
    put<uint64_t>(data.size());
    bytes_.insert(bytes_.end(), data.begin(), data.end());
  }
  void put_string(std::string_view text) {
    put_bytes({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }
  // A count, then each element byte for byte.
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void put_array(std::span<const T> items) {
    put<uint64_t>(items.size());
    const auto* p = reinterpret_cast<const uint8_t*>(items.data());
    bytes_.insert(bytes_.end(), p, p + items.size_bytes());
  }

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> data) : data_(data) {}

  // `field` names what is read, for the error when the input is too short.
  template <typename T>
  requires std::is_trivially_copyable_v<T> Result<T> get(const char* field) {
    DSEC_TRY(need(sizeof(T), field));
    T value;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  Result<std::vector<uint8_t>> get_bytes(const char* field) {
    const auto size = DSEC_TRY(get<uint64_t>(field));
    DSEC_TRY(need(size, field));
    std::vector<uint8_t> out(data_.begin() + static_cast<std::ptrdiff_t>(pos_),
                             data_.begin() + static_cast<std::ptrdiff_t>(pos_ + size));
    pos_ += size;
    return out;
  }
  Result<std::string> get_string(const char* field) {
    const auto bytes = DSEC_TRY(get_bytes(field));
    return std::string(bytes.begin(), bytes.end());
  }
  // At most `max_items` elements: a count from a hostile file must not size an allocation.
  template <typename T>
  requires std::is_trivially_copyable_v<T> Result<std::vector<T>> get_array(const char* field,
                                                                            uint64_t max_items) {
    const auto count = DSEC_TRY(get<uint64_t>(field));
    if (count > max_items) {
      return fail(std::string("snapshot state: ") + field + " has " + std::to_string(count) +
                      " entries, more than the " + std::to_string(max_items) + " allowed",
                  "the state file is corrupt or from an incompatible dsec-vmm");
    }
    // A count whose size in bytes would wrap past 2^64 needs more than any input has.
    DSEC_TRY(need(count <= UINT64_MAX / sizeof(T) ? count * sizeof(T) : UINT64_MAX, field));
    std::vector<T> out(count);
    if (count > 0) {  // an empty vector's data() may be null, which memcpy must not get
      std::memcpy(out.data(), data_.data() + pos_, count * sizeof(T));
    }
    pos_ += count * sizeof(T);
    return out;
  }
  // Fails unless every byte was read: trailing bytes mean the writer and reader disagree.
  Status expect_end(const char* what) const {
    if (pos_ != data_.size()) {
      return fail(std::string("snapshot state: ") + what + " has " +
                      std::to_string(data_.size() - pos_) + " unexpected trailing bytes",
                  "the state file is corrupt or from an incompatible dsec-vmm");
    }
    return ok();
  }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  Status need(uint64_t size, const char* field) const {
    if (size > data_.size() - pos_) {
      return fail(std::string("snapshot state: truncated while reading ") + field + " (needs " +
                      std::to_string(size) + " bytes, " + std::to_string(data_.size() - pos_) +
                      " left)",
                  "the state file is corrupt or truncated: take the snapshot again");
    }
    return ok();
  }

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

}  // namespace dsec::snapshot

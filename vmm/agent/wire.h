// The byte-level encoding under the agent protocol (docs/agent-protocol.md): little-endian
// integers and length-prefixed strings, written into and read out of a payload. The reader
// treats its input as hostile: every length is checked against what is left and against a
// bound before anything is allocated, and a payload must be consumed exactly.
//
// Dependency-free beyond vmm/common/error.h: the guest agent compiles it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::agent {

class WireWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  // u32 length, then the bytes.
  void string(std::string_view s);
  // u32 count, then each string.
  void strings(const std::vector<std::string>& list);
  void raw(std::span<const uint8_t> data) { bytes_.insert(bytes_.end(), data.begin(), data.end()); }

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  // `what` names the payload in errors ("exec request").
  WireReader(std::span<const uint8_t> data, std::string_view what) : data_(data), what_(what) {}

  Result<uint8_t> u8();
  Result<uint32_t> u32();
  Result<uint64_t> u64();
  Result<int32_t> i32();
  // A string of at most max_len bytes. With no_nul, an embedded NUL byte is an error
  // (argv, environment and paths reach C APIs).
  Result<std::string> string(size_t max_len, bool no_nul = true);
  // At most max_count strings of at most max_len bytes each.
  Result<std::vector<std::string>> strings(size_t max_count, size_t max_len);
  // The rest of the payload.
  std::span<const uint8_t> rest();
  // Fails unless every byte was read: trailing bytes mean a malformed payload.
  Status finish() const;
  // The next n bytes, as they are; `field` names them in the error when fewer are left.
  Result<std::span<const uint8_t>> take(size_t n, std::string_view field);

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string_view what_;
};

}  // namespace dsec::agent

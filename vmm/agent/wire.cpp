#include "vmm/agent/wire.h"

#include <algorithm>
#include <cstring>

namespace dsec::agent {

void WireWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
}

void WireWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
}

void WireWriter::string(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  bytes_.insert(bytes_.end(), s.begin(), s.end());
}

void WireWriter::strings(const std::vector<std::string>& list) {
  u32(static_cast<uint32_t>(list.size()));
  for (const auto& s : list) {
    string(s);
  }
}

Result<std::span<const uint8_t>> WireReader::take(size_t n, std::string_view field) {
  if (n > data_.size() - pos_) {
    return fail(std::string(what_) + ": " + std::string(field) + " needs " + std::to_string(n) +
                " bytes at offset " + std::to_string(pos_) + " but the payload has " +
                std::to_string(data_.size() - pos_) + " left");
  }
  auto out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

Result<uint8_t> WireReader::u8() {
  const auto b = DSEC_TRY(take(1, "a byte"));
  return b[0];
}

Result<uint32_t> WireReader::u32() {
  const auto b = DSEC_TRY(take(4, "a 32-bit field"));
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) {
    v = (v << 8) | b[static_cast<size_t>(i)];
  }
  return v;
}

Result<uint64_t> WireReader::u64() {
  const auto b = DSEC_TRY(take(8, "a 64-bit field"));
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | b[static_cast<size_t>(i)];
  }
  return v;
}

Result<int32_t> WireReader::i32() {
  const uint32_t v = DSEC_TRY(u32());
  return static_cast<int32_t>(v);
}

Result<std::string> WireReader::string(size_t max_len, bool no_nul) {
  const uint32_t len = DSEC_TRY(u32());
  if (len > max_len) {
    return fail(std::string(what_) + ": a string of " + std::to_string(len) +
                " bytes is longer than the limit of " + std::to_string(max_len));
  }
  const auto b = DSEC_TRY(take(len, "a string"));
  if (no_nul && std::find(b.begin(), b.end(), uint8_t{0}) != b.end()) {
    return fail(std::string(what_) + ": a string holds a NUL byte");
  }
  return std::string(b.begin(), b.end());
}

Result<std::vector<std::string>> WireReader::strings(size_t max_count, size_t max_len) {
  const uint32_t count = DSEC_TRY(u32());
  if (count > max_count) {
    return fail(std::string(what_) + ": a list of " + std::to_string(count) +
                " strings is longer than the limit of " + std::to_string(max_count));
  }
  std::vector<std::string> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(DSEC_TRY(string(max_len)));
  }
  return out;
}

std::span<const uint8_t> WireReader::rest() {
  auto out = data_.subspan(pos_);
  pos_ = data_.size();
  return out;
}

Status WireReader::finish() const {
  if (pos_ != data_.size()) {
    return fail(std::string(what_) + ": " + std::to_string(data_.size() - pos_) +
                " trailing bytes after the last field");
  }
  return ok();
}

}  // namespace dsec::agent

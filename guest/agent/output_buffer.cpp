#include "guest/agent/output_buffer.h"

#include <algorithm>

namespace dsec::agent {

void OutputBuffer::append(std::span<const uint8_t> bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  if (bytes_.size() <= capacity_) {
    return;
  }
  const size_t over = bytes_.size() - capacity_;
  const uint64_t new_begin = begin_ + over;
  if (unread_ < new_begin) {
    dropped_ += new_begin - std::max(unread_, begin_);
  }
  bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(over));
  begin_ = new_begin;
}

std::vector<uint8_t> OutputBuffer::read(uint64_t& offset, size_t max) {
  offset = std::max(offset, begin_);
  if (offset >= end()) {
    return {};
  }
  const size_t from = static_cast<size_t>(offset - begin_);
  const size_t n = std::min<size_t>(max, bytes_.size() - from);
  std::vector<uint8_t> out(bytes_.begin() + static_cast<std::ptrdiff_t>(from),
                           bytes_.begin() + static_cast<std::ptrdiff_t>(from + n));
  offset += n;
  unread_ = std::max(unread_, offset);
  return out;
}

void OutputBuffer::release_before(uint64_t offset) {
  const uint64_t upto = std::min({offset, unread_, end()});
  if (upto <= begin_) {
    return;
  }
  bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(upto - begin_));
  begin_ = upto;
}

}  // namespace dsec::agent

// One stream of a kept process's output (stdout, stderr or its terminal), held until read
// and bounded: past its capacity the oldest bytes go, and those no one had read are
// counted. Bytes are addressed by their offset in the stream since the process started, so
// each reader (an attached connection) keeps its own place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace dsec::agent {

inline constexpr size_t kOutputBufferBytes = size_t{1} << 20;

class OutputBuffer {
 public:
  explicit OutputBuffer(size_t capacity = kOutputBufferBytes) : capacity_(capacity) {}

  void append(std::span<const uint8_t> bytes);
  // Up to `max` bytes from `offset` on (from the oldest kept byte when `offset` is older);
  // moves `offset` past them, and the unread position with it.
  std::vector<uint8_t> read(uint64_t& offset, size_t max);
  // Forgets the bytes before `offset` that were read (a reader that all readers passed).
  void release_before(uint64_t offset);

  uint64_t begin() const { return begin_; }
  uint64_t end() const { return begin_ + bytes_.size(); }
  // Where a new reader starts: the first byte no one has read yet.
  uint64_t unread() const { return unread_ < begin_ ? begin_ : unread_; }
  // Bytes dropped for room before anyone read them.
  uint64_t dropped() const { return dropped_; }

 private:
  size_t capacity_;
  std::deque<uint8_t> bytes_;
  uint64_t begin_ = 0;
  uint64_t unread_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace dsec::agent

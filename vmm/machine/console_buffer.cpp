#include "vmm/machine/console_buffer.h"

#include <algorithm>
#include <cstring>

namespace dsec::machine {

ConsoleBuffer::ConsoleBuffer(size_t capacity) : storage_(std::max<size_t>(capacity, 1)) {}

bool ConsoleBuffer::push(std::span<const uint8_t> bytes) {
  const std::lock_guard lock(mutex_);
  const bool was_empty = size_ == 0;
  const size_t taken = std::min(bytes.size(), storage_.size() - size_);
  dropped_ += bytes.size() - taken;
  // The free space starts after the newest byte and may wrap around the end.
  size_t tail = (head_ + size_) % storage_.size();
  size_t copied = 0;
  while (copied < taken) {
    const size_t run = std::min(taken - copied, storage_.size() - tail);
    std::memcpy(storage_.data() + tail, bytes.data() + copied, run);
    copied += run;
    tail = (tail + run) % storage_.size();
  }
  size_ += taken;
  return was_empty && taken > 0;
}

size_t ConsoleBuffer::peek(std::span<uint8_t> out) const {
  const std::lock_guard lock(mutex_);
  const size_t n = std::min(out.size(), size_);
  size_t at = head_;
  size_t copied = 0;
  while (copied < n) {
    const size_t run = std::min(n - copied, storage_.size() - at);
    std::memcpy(out.data() + copied, storage_.data() + at, run);
    copied += run;
    at = (at + run) % storage_.size();
  }
  return n;
}

void ConsoleBuffer::consume(size_t n) {
  const std::lock_guard lock(mutex_);
  n = std::min(n, size_);
  head_ = (head_ + n) % storage_.size();
  size_ -= n;
}

size_t ConsoleBuffer::discard() {
  const std::lock_guard lock(mutex_);
  const size_t n = size_;
  head_ = 0;
  size_ = 0;
  return n;
}

size_t ConsoleBuffer::size() const {
  const std::lock_guard lock(mutex_);
  return size_;
}

uint64_t ConsoleBuffer::dropped() const {
  const std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace dsec::machine

// The bytes the guest wrote to its console that the host has not taken yet: a bounded FIFO
// between the vCPU threads (through the UART's output sink) and the console thread that
// writes them out. A push never waits: what does not fit is dropped and counted, so that a
// guest writing faster than the host reads costs neither a blocked vCPU nor memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace dsec::machine {

class ConsoleBuffer {
 public:
  // `capacity` bytes, allocated here once.
  explicit ConsoleBuffer(size_t capacity);

  // Appends what fits of `bytes` and counts the rest as dropped. Returns whether the buffer
  // was empty before (its reader, which sleeps while it is, must then be woken).
  bool push(std::span<const uint8_t> bytes);
  // Copies the oldest bytes, up to out.size(), into `out` without taking them; returns how
  // many. Only the reader takes bytes, so they stay until its consume().
  size_t peek(std::span<uint8_t> out) const;
  // Takes the `n` oldest bytes (at most size()).
  void consume(size_t n);
  // Takes everything (the caller counts it where it belongs); returns how many bytes.
  size_t discard();

  size_t size() const;
  size_t capacity() const { return storage_.size(); }
  // Bytes push() found no room for, so far.
  uint64_t dropped() const;

 private:
  mutable std::mutex mutex_;
  std::vector<uint8_t> storage_;
  size_t head_ = 0;  // index of the oldest byte
  size_t size_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace dsec::machine

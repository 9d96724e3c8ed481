// Records addressed by 64-bit keys that are safe to hand to the kernel as io_uring
// user_data: a key names a slot and the generation the slot had when it was allocated,
// so a completion that arrives after its slot was released (and perhaps reused) finds
// nothing instead of another operation's record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace dsec::io {

template <typename T>
class SlotTable {
 public:
  // No live key is ever 0 (generations start at 1) or ~0 (that takes 2^32 slots), so
  // both are free for callers' own markers (liburing uses ~0 for its internal timeouts).
  static constexpr uint64_t kNoKey = 0;

  struct Allocated {
    uint64_t key;
    T& value;
  };

  // A fresh slot; its value is as the last release() left it (callers reset values
  // themselves, so that buffers such as vectors keep their capacity across reuse).
  Allocated allocate() {
    uint32_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();  // a deque never moves existing elements
    }
    Slot& slot = slots_[index];
    slot.live = true;
    ++live_;
    return {make_key(index, slot.generation), slot.value};
  }

  // The value of a live key; nullptr for a released, stale or unknown key.
  T* find(uint64_t key) {
    const auto index = static_cast<uint32_t>(key);
    if (index >= slots_.size()) {
      return nullptr;
    }
    Slot& slot = slots_[index];
    if (!slot.live || slot.generation != static_cast<uint32_t>(key >> 32)) {
      return nullptr;
    }
    return &slot.value;
  }

  // Ends a key: find() on it returns nullptr from now on, even once the slot is reused.
  void release(uint64_t key) {
    if (find(key) == nullptr) {
      return;
    }
    const auto index = static_cast<uint32_t>(key);
    Slot& slot = slots_[index];
    slot.live = false;
    if (++slot.generation == 0) {
      slot.generation = 1;
    }
    --live_;
    free_.push_back(index);
  }

  std::size_t live() const { return live_; }

  // Calls fn(key, value) for every live slot.
  template <typename Fn>
  void for_each_live(Fn&& fn) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].live) {
        fn(make_key(static_cast<uint32_t>(i), slots_[i].generation), slots_[i].value);
      }
    }
  }

 private:
  struct Slot {
    uint32_t generation = 1;
    bool live = false;
    T value{};
  };

  static uint64_t make_key(uint32_t index, uint32_t generation) {
    return (static_cast<uint64_t>(generation) << 32) | index;
  }

  std::deque<Slot> slots_;
  std::vector<uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace dsec::io

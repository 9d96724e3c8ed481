// Firecracker's SharedIncMetric: a counter that any thread adds to and that one reporter
// reads as what was counted since its last report (Firecracker writes each flush's
// increments, not totals: docs/api.md, "Metrics").
#pragma once

#include <atomic>
#include <cstdint>

namespace dsec {

class MetricCounter {
 public:
  void add(uint64_t n) { count_.fetch_add(n, std::memory_order_relaxed); }
  void inc() { add(1); }
  // Everything counted so far.
  uint64_t total() const { return count_.load(std::memory_order_relaxed); }
  // What was counted since the previous call (since the start, the first time). One
  // reporter at a time: two calling at once could report an increment twice.
  uint64_t take_since_last_report() {
    const uint64_t now = total();
    return now - reported_.exchange(now, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> reported_{0};
};

}  // namespace dsec

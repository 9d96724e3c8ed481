// Lets a log line through at most once per interval and counts the ones it held back, so
// that a guest repeating whatever makes a device complain cannot flood the VMM's log.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace dsec {

// Not thread-safe: each user (a device, whose work is serialized) owns one.
class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogRateLimiter(Clock::duration interval = std::chrono::seconds(5))
      : interval_(interval) {}

  // nullopt: stay quiet. Otherwise log, mentioning the returned count of lines held back
  // since the last one let through when it is not 0.
  std::optional<uint64_t> allow(Clock::time_point now = Clock::now()) {
    if (last_ && now - *last_ < interval_) {
      ++suppressed_;
      return std::nullopt;
    }
    last_ = now;
    const uint64_t held_back = suppressed_;
    suppressed_ = 0;
    return held_back;
  }

 private:
  Clock::duration interval_;
  std::optional<Clock::time_point> last_;
  uint64_t suppressed_ = 0;
};

}  // namespace dsec

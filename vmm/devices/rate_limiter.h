// Firecracker's rate limiters for virtio-blk and virtio-net (rate_limiter_config.h): token
// buckets, and the one way a device waits for tokens, a timer on its event loop.
//
// TokenBucket and RateLimiter are plain arithmetic on a time the caller passes in, so that
// tests control the clock. LoopRateLimiter is what a device holds: it reads the clock,
// and when an operation has to wait it sets a timer on the device's event loop and calls
// the device back when the tokens are due. The device stops taking work from its queue in
// between (no busy loop, and nothing sleeps on a vCPU thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "vmm/common/log_rate_limiter.h"
#include "vmm/devices/rate_limiter_config.h"
#include "vmm/io/event_loop.h"

namespace dsec::devices {

using RateClock = std::chrono::steady_clock;

// One bucket. It starts full, with its one-time burst on top; the burst is spent first and
// never comes back. An operation larger than the whole bucket goes when the bucket is
// full and leaves it in debt, which the refill pays off before anything else goes (so a
// limit is kept even for requests larger than `size`, as Firecracker keeps it).
class TokenBucket {
 public:
  TokenBucket(const TokenBucketConfig& config, RateClock::time_point now);

  // Takes `tokens` if the bucket has them now, else takes nothing and returns false. A
  // bucket that limits nothing always gives.
  bool take(uint64_t tokens, RateClock::time_point now);
  // How long from `now` until take(tokens) would give: zero if it would now.
  std::chrono::nanoseconds time_until(uint64_t tokens, RateClock::time_point now) const;
  // Tokens take() could give now, the one-time burst included; 0 while in debt.
  uint64_t available(RateClock::time_point now) const;

 private:
  // Adds what the time since last_refill_ brought, paying the debt first.
  void refill(RateClock::time_point now);

  TokenBucketConfig config_;
  uint64_t level_ = 0;  // 0 .. size
  uint64_t debt_ = 0;   // owed by an operation larger than the bucket; level_ is 0
  uint64_t burst_ = 0;  // what is left of the one-time burst
  RateClock::time_point last_refill_;
};

// A bucket of bytes and a bucket of operations; each may be left out.
class RateLimiter {
 public:
  RateLimiter(const RateLimiterConfig& config, RateClock::time_point now);

  bool limits() const { return limits_; }
  // One operation of `bytes` bytes: takes one op and the bytes, from both buckets or from
  // neither.
  bool take(uint64_t bytes, RateClock::time_point now);
  // How long from `now` until take(bytes) would give.
  std::chrono::nanoseconds time_until(uint64_t bytes, RateClock::time_point now) const;

 private:
  std::optional<TokenBucket> bandwidth_;
  std::optional<TokenBucket> ops_;
  bool limits_ = false;
};

// A device's RateLimiter on its event loop. All calls on the loop's thread (or before the
// loop runs). `resume` runs on the loop thread when an operation admit() refused may go; it
// is never called after this object is destroyed, so it may refer to the device that owns
// it (a device whose state outlives it, as virtio-blk's does, gives a weak reference).
class LoopRateLimiter {
 public:
  LoopRateLimiter(const RateLimiterConfig& config, io::EventLoop& loop,
                  std::function<void()> resume);
  LoopRateLimiter(const LoopRateLimiter&) = delete;
  LoopRateLimiter& operator=(const LoopRateLimiter&) = delete;

  // Whether an operation of `bytes` bytes may go now; if so its tokens are taken. If not,
  // nothing is taken, a timer is set for when it may, and every admit() is refused until
  // that timer has called `resume` (which then tries again).
  bool admit(uint64_t bytes);
  // A refused operation waits for the timer.
  bool waiting() const { return waiting_->armed; }

 private:
  // Shared with the timer's handler, which holds it weakly: a timer that outlives this
  // object finds it gone and does nothing.
  struct Waiting {
    bool armed = false;
    std::function<void()> resume;
  };

  RateLimiter limiter_;
  io::EventLoop& loop_;
  std::shared_ptr<Waiting> waiting_;
  LogRateLimiter log_;
};

}  // namespace dsec::devices

#include "vmm/devices/rate_limiter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace dsec::devices {
namespace {

// Tokens times nanoseconds: a u64 count of tokens times a refill time of up to 2^64 ms.
__extension__ using Wide = unsigned __int128;

constexpr Wide kNsPerMs = 1'000'000;
// The longest wait time_until() reports (about 146 years): a duration's range is 2^63 ns.
constexpr Wide kLongestWaitNs = Wide{std::numeric_limits<int64_t>::max()} / 2;

uint64_t to_u64(Wide value) {
  return static_cast<uint64_t>(std::min<Wide>(value, std::numeric_limits<uint64_t>::max()));
}

}  // namespace

TokenBucket::TokenBucket(const TokenBucketConfig& config, RateClock::time_point now)
    : config_(config), level_(config.size), burst_(config.one_time_burst), last_refill_(now) {}

void TokenBucket::refill(RateClock::time_point now) {
  if (!config_.limits()) {
    return;
  }
  // A full bucket gains nothing from the time it stays full.
  if (debt_ == 0 && level_ == config_.size) {
    last_refill_ = std::max(last_refill_, now);
    return;
  }
  if (now <= last_refill_) {
    return;
  }
  const Wide refill_ns = Wide{config_.refill_time_ms} * kNsPerMs;
  const auto elapsed = static_cast<Wide>((now - last_refill_).count());
  const Wide tokens = elapsed * config_.size / refill_ns;
  if (tokens == 0) {
    return;
  }
  // The time those tokens took, rounded up: the rest of `elapsed` counts toward the next.
  const Wide used_ns = (tokens * refill_ns + config_.size - 1) / config_.size;
  last_refill_ += std::chrono::nanoseconds(static_cast<int64_t>(used_ns));
  Wide left = tokens;
  const Wide paid = std::min<Wide>(left, debt_);
  debt_ -= to_u64(paid);
  left -= paid;
  level_ = to_u64(std::min<Wide>(Wide{level_} + left, config_.size));
  if (debt_ == 0 && level_ == config_.size) {
    last_refill_ = now;
  }
}

bool TokenBucket::take(uint64_t tokens, RateClock::time_point now) {
  if (!config_.limits()) {
    return true;
  }
  refill(now);
  if (burst_ >= tokens) {
    burst_ -= tokens;
    return true;
  }
  const uint64_t need = tokens - burst_;
  if (debt_ != 0) {
    return false;
  }
  if (level_ >= need) {
    burst_ = 0;
    level_ -= need;
    return true;
  }
  if (need > config_.size && level_ == config_.size) {
    burst_ = 0;
    debt_ = need - config_.size;
    level_ = 0;
    last_refill_ = now;
    return true;
  }
  return false;
}

std::chrono::nanoseconds TokenBucket::time_until(uint64_t tokens, RateClock::time_point now) const {
  if (!config_.limits()) {
    return std::chrono::nanoseconds::zero();
  }
  TokenBucket at_now = *this;
  at_now.refill(now);
  if (at_now.burst_ >= tokens) {
    return std::chrono::nanoseconds::zero();
  }
  // More than the bucket holds goes from a full bucket.
  const uint64_t target = std::min(tokens - at_now.burst_, config_.size);
  if (at_now.debt_ == 0 && at_now.level_ >= target) {
    return std::chrono::nanoseconds::zero();
  }
  const Wide missing = Wide{at_now.debt_} + target - at_now.level_;
  const Wide refill_ns = Wide{config_.refill_time_ms} * kNsPerMs;
  // missing * refill_ns may not fit even 128 bits (2^65 tokens times 2^84 ns): such a
  // wait is past the longest anyway.
  const Wide due_ns =
      missing > (std::numeric_limits<Wide>::max() - config_.size) / refill_ns
          ? kLongestWaitNs
          : std::min((missing * refill_ns + config_.size - 1) / config_.size, kLongestWaitNs);
  const auto due = at_now.last_refill_ + std::chrono::nanoseconds(static_cast<int64_t>(due_ns));
  return std::max(std::chrono::nanoseconds::zero(),
                  std::chrono::duration_cast<std::chrono::nanoseconds>(due - now));
}

uint64_t TokenBucket::available(RateClock::time_point now) const {
  if (!config_.limits()) {
    return std::numeric_limits<uint64_t>::max();
  }
  TokenBucket at_now = *this;
  at_now.refill(now);
  return to_u64(Wide{at_now.level_} + at_now.burst_);
}

RateLimiter::RateLimiter(const RateLimiterConfig& config, RateClock::time_point now)
    : limits_(config.limits()) {
  if (config.bandwidth && config.bandwidth->limits()) {
    bandwidth_.emplace(*config.bandwidth, now);
  }
  if (config.ops && config.ops->limits()) {
    ops_.emplace(*config.ops, now);
  }
}

bool RateLimiter::take(uint64_t bytes, RateClock::time_point now) {
  if (!limits_) {
    return true;
  }
  if (time_until(bytes, now) != std::chrono::nanoseconds::zero()) {
    return false;
  }
  // Both have their tokens now: neither take can fail.
  if (bandwidth_) {
    static_cast<void>(bandwidth_->take(bytes, now));
  }
  if (ops_) {
    static_cast<void>(ops_->take(1, now));
  }
  return true;
}

std::chrono::nanoseconds RateLimiter::time_until(uint64_t bytes, RateClock::time_point now) const {
  std::chrono::nanoseconds wait = std::chrono::nanoseconds::zero();
  if (bandwidth_) {
    wait = std::max(wait, bandwidth_->time_until(bytes, now));
  }
  if (ops_) {
    wait = std::max(wait, ops_->time_until(1, now));
  }
  return wait;
}

LoopRateLimiter::LoopRateLimiter(const RateLimiterConfig& config, io::EventLoop& loop,
                                 std::function<void()> resume)
    : limiter_(config, RateClock::now()),
      loop_(loop),
      waiting_(std::make_shared<Waiting>(Waiting{false, std::move(resume)})) {}

bool LoopRateLimiter::admit(uint64_t bytes) {
  if (!limiter_.limits()) {
    return true;
  }
  if (waiting_->armed) {
    return false;
  }
  const auto now = RateClock::now();
  if (limiter_.take(bytes, now)) {
    return true;
  }
  auto timer =
      loop_.add_timer(limiter_.time_until(bytes, now), [weak = std::weak_ptr<Waiting>(waiting_)] {
        if (const auto waiting = weak.lock()) {
          waiting->armed = false;
          waiting->resume();
        }
      });
  if (!timer) {
    // Without a timer nothing would wake the device: let the operation go unlimited.
    if (const auto suppressed = log_.allow()) {
      spdlog::warn("rate limiter: cannot set its timer ({}); not limiting{}",
                   timer.error().message(),
                   *suppressed != 0 ? fmt::format(" ({} similar lines suppressed)", *suppressed)
                                    : std::string());
    }
    return true;
  }
  waiting_->armed = true;
  return false;
}

}  // namespace dsec::devices

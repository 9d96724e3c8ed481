// What a device's rate limiter is configured with, as Firecracker's API has it
// (docs/api-boot.md): plain data, for the machine's configuration and the API's bodies.
// rate_limiter.h does the limiting.
#pragma once

#include <cstdint>
#include <optional>

namespace dsec::devices {

// Firecracker's TokenBucket: `size` tokens, refilled evenly from empty to full in
// `refill_time_ms` milliseconds, plus `one_time_burst` tokens on top at the start that are
// not refilled. A size or refill time of 0 limits nothing.
struct TokenBucketConfig {
  uint64_t size = 0;
  uint64_t one_time_burst = 0;
  uint64_t refill_time_ms = 0;

  bool limits() const { return size != 0 && refill_time_ms != 0; }
  bool operator==(const TokenBucketConfig&) const = default;
};

// Firecracker's RateLimiter: a bucket of bytes and a bucket of operations (requests,
// frames), each optional; an operation goes when both have its tokens.
struct RateLimiterConfig {
  std::optional<TokenBucketConfig> bandwidth;
  std::optional<TokenBucketConfig> ops;

  bool limits() const { return (bandwidth && bandwidth->limits()) || (ops && ops->limits()); }
  bool operator==(const RateLimiterConfig&) const = default;
};

}  // namespace dsec::devices

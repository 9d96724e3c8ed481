// MMDS version 2's session tokens: a guest's `PUT /latest/api/token` with a lifetime of
// 1..21600 seconds gets one, and presents it on every GET until it expires. A token is 32
// random bytes (getrandom), base64url; the authority keeps each with its expiry. A guest
// may ask for tokens without end, so the table is bounded: when it is full, the expired
// go first, then the one nearest its expiry.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "vmm/common/error.h"

namespace dsec::mmds {

class TokenAuthority {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kMinTtlSeconds = 1;
  static constexpr uint32_t kMaxTtlSeconds = 21600;
  static constexpr size_t kMaxTokens = 1024;

  // A new token valid for `ttl_seconds` from `now`; an error (Firecracker's text) for a
  // lifetime out of range.
  Result<std::string> generate(uint32_t ttl_seconds, Clock::time_point now);
  // Whether `token` was given by generate() and has not expired at `now`.
  bool is_valid(std::string_view token, Clock::time_point now) const;
  size_t size() const { return expiries_.size(); }

 private:
  void make_room(Clock::time_point now);

  std::unordered_map<std::string, Clock::time_point> expiries_;
};

}  // namespace dsec::mmds

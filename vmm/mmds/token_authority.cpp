#include "vmm/mmds/token_authority.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace dsec::mmds {
namespace {

constexpr size_t kTokenBytes = 32;

Result<std::string> random_token() {
  std::array<uint8_t, kTokenBytes> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail_errno("MMDS: getrandom for a session token", errno);
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  // base64url without padding: every 6 bits, 32 bytes give 43 characters.
  std::string token;
  uint32_t bits = 0;
  int count = 0;
  for (const uint8_t b : bytes) {
    bits = (bits << 8) | b;
    count += 8;
    while (count >= 6) {
      count -= 6;
      token.push_back(kAlphabet[(bits >> count) & 0x3f]);
    }
  }
  if (count > 0) {
    token.push_back(kAlphabet[(bits << (6 - count)) & 0x3f]);
  }
  return token;
}

}  // namespace

Result<std::string> TokenAuthority::generate(uint32_t ttl_seconds, Clock::time_point now) {
  if (ttl_seconds < kMinTtlSeconds || ttl_seconds > kMaxTtlSeconds) {
    return fail(fmt::format(
        "Invalid time to live value provided for token: {}. Please provide a value between {} "
        "and {}.",
        ttl_seconds, kMinTtlSeconds, kMaxTtlSeconds));
  }
  std::string token = DSEC_TRY(random_token());
  make_room(now);
  expiries_[token] = now + std::chrono::seconds(ttl_seconds);
  return token;
}

bool TokenAuthority::is_valid(std::string_view token, Clock::time_point now) const {
  const auto it = expiries_.find(std::string(token));
  return it != expiries_.end() && now < it->second;
}

void TokenAuthority::make_room(Clock::time_point now) {
  if (expiries_.size() < kMaxTokens) {
    return;
  }
  std::erase_if(expiries_, [now](const auto& entry) { return entry.second <= now; });
  if (expiries_.size() >= kMaxTokens) {
    expiries_.erase(
        std::min_element(expiries_.begin(), expiries_.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; }));
  }
}

}  // namespace dsec::mmds

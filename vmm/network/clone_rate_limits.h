// A clone's network rate limits (docs/network.md, "Rate limits"): what its virtio-net
// device's token buckets let through each way, in Firecracker's form
// (rate_limiter_json.h): `"rx_rate_limiter"` (what the guest receives) and
// `"tx_rate_limiter"` (what it sends), each `{"bandwidth": {"size", "one_time_burst",
// "refill_time"}, "ops": {...}}` in bytes and frames. An image names them (PUT
// /images/{name}); `dsec-vmm restore --net-rate-limiters` gives them to a clone's device.
// Pure: no system call (in libdsecvmm, with the egress policy's JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/json_object.h"
#include "vmm/devices/rate_limiter_config.h"

namespace dsec::network {

// Bounds on a bucket, so that a limit is one a person meant: a size (bytes or frames) and a
// one-time burst of at most 1 TiB, a refill time from 1 ms to an hour. A bucket of size 0
// or refill time 0, which Firecracker takes for "no limit", is refused: leave it out.
inline constexpr uint64_t kMaxBucketTokens = uint64_t{1} << 40;
inline constexpr uint64_t kMaxRefillTimeMs = 3'600'000;

struct CloneRateLimits {
  devices::RateLimiterConfig rx{};  // frames to the guest
  devices::RateLimiterConfig tx{};  // frames from the guest
  bool limits() const { return rx.limits() || tx.limits(); }
  bool operator==(const CloneRateLimits&) const = default;
};

// The optional fields "rx_rate_limiter" and "tx_rate_limiter" of `object` (an image's
// body), strictly: a wrong type, a negative, fractional or out-of-bounds number, an unknown
// field are refused, naming the field and its bounds. Absent: no limit that way.
Result<CloneRateLimits> read_clone_rate_limits(JsonObject& object);
// Adds those fields to `object`, each only where it limits.
void write_clone_rate_limits(const CloneRateLimits& limits, nlohmann::json& object);

// The JSON text `{"rx_rate_limiter": ..., "tx_rate_limiter": ...}` (restore
// --net-rate-limiters), read as strictly, and written.
Result<CloneRateLimits> parse_clone_rate_limits(std::string_view text);
std::string clone_rate_limits_text(const CloneRateLimits& limits);

}  // namespace dsec::network

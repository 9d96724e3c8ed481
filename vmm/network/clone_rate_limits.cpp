#include "vmm/network/clone_rate_limits.h"

#include <fmt/format.h>

#include <optional>

#include "vmm/devices/rate_limiter_json.h"

namespace dsec::network {
namespace {

Status check_bucket(const std::optional<devices::TokenBucketConfig>& bucket, const char* limiter,
                    const char* name) {
  if (!bucket) {
    return ok();
  }
  const std::string where = fmt::format("'{}.{}'", limiter, name);
  const std::string bounds = fmt::format(
      "give 'size' and 'one_time_burst' up to {} and 'refill_time' from 1 to {} ms, or leave the "
      "bucket out for no limit",
      kMaxBucketTokens, kMaxRefillTimeMs);
  if (bucket->size == 0 || bucket->refill_time_ms == 0) {
    return fail(where + ": a 'size' or 'refill_time' of 0 limits nothing", bounds);
  }
  if (bucket->size > kMaxBucketTokens || bucket->one_time_burst > kMaxBucketTokens ||
      bucket->refill_time_ms > kMaxRefillTimeMs) {
    return fail(fmt::format("{}: size {}, one_time_burst {}, refill_time {} is out of bounds",
                            where, bucket->size, bucket->one_time_burst, bucket->refill_time_ms),
                bounds);
  }
  return ok();
}

Result<devices::RateLimiterConfig> read_limiter(JsonObject& object, const char* name) {
  const auto limiter = DSEC_TRY(devices::optional_rate_limiter(object, name));
  if (!limiter) {
    return devices::RateLimiterConfig{};
  }
  DSEC_TRY(check_bucket(limiter->bandwidth, name, "bandwidth"));
  DSEC_TRY(check_bucket(limiter->ops, name, "ops"));
  return *limiter;
}

}  // namespace

Result<CloneRateLimits> read_clone_rate_limits(JsonObject& object) {
  CloneRateLimits limits;
  limits.rx = DSEC_TRY(read_limiter(object, "rx_rate_limiter"));
  limits.tx = DSEC_TRY(read_limiter(object, "tx_rate_limiter"));
  return limits;
}

void write_clone_rate_limits(const CloneRateLimits& limits, nlohmann::json& object) {
  if (limits.rx.limits()) {
    object["rx_rate_limiter"] = devices::rate_limiter_json(limits.rx);
  }
  if (limits.tx.limits()) {
    object["tx_rate_limiter"] = devices::rate_limiter_json(limits.tx);
  }
}

Result<CloneRateLimits> parse_clone_rate_limits(std::string_view text) {
  auto object = DSEC_TRY(JsonObject::parse(text, "the rate limiters"));
  auto limits = DSEC_TRY(read_clone_rate_limits(object));
  DSEC_TRY(object.finish());
  return limits;
}

std::string clone_rate_limits_text(const CloneRateLimits& limits) {
  auto object = nlohmann::json::object();
  write_clone_rate_limits(limits, object);
  return object.dump();
}

}  // namespace dsec::network

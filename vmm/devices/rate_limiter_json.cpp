#include "vmm/devices/rate_limiter_json.h"

#include <fmt/format.h>

#include <string>

namespace dsec::devices {
namespace {

Result<std::optional<TokenBucketConfig>> optional_bucket(JsonObject& limiter, const char* name,
                                                         const std::string& where) {
  const auto value = DSEC_TRY(limiter.optional_object(name));
  if (!value) {
    return std::nullopt;
  }
  auto bucket =
      DSEC_TRY(JsonObject::of(*value, fmt::format("{}.{}", where, name), limiter.nulls()));
  TokenBucketConfig config;
  config.size = DSEC_TRY(bucket.unsigned_int("size"));
  config.one_time_burst = DSEC_TRY(bucket.optional_unsigned_int("one_time_burst")).value_or(0);
  config.refill_time_ms = DSEC_TRY(bucket.unsigned_int("refill_time"));
  DSEC_TRY(bucket.finish());
  return config;
}

nlohmann::json bucket_json(const TokenBucketConfig& bucket) {
  return {{"size", bucket.size},
          {"one_time_burst", bucket.one_time_burst},
          {"refill_time", bucket.refill_time_ms}};
}

}  // namespace

Result<std::optional<RateLimiterConfig>> optional_rate_limiter(JsonObject& object,
                                                               const char* name) {
  const auto value = DSEC_TRY(object.optional_object(name));
  if (!value) {
    return std::nullopt;
  }
  auto limiter = DSEC_TRY(JsonObject::of(*value, name, object.nulls()));
  RateLimiterConfig config;
  config.bandwidth = DSEC_TRY(optional_bucket(limiter, "bandwidth", name));
  config.ops = DSEC_TRY(optional_bucket(limiter, "ops", name));
  DSEC_TRY(limiter.finish());
  return config;
}

nlohmann::json rate_limiter_json(const RateLimiterConfig& config) {
  auto json = nlohmann::json::object();
  if (config.bandwidth) {
    json["bandwidth"] = bucket_json(*config.bandwidth);
  }
  if (config.ops) {
    json["ops"] = bucket_json(*config.ops);
  }
  return json;
}

}  // namespace dsec::devices

// A rate limiter in Firecracker's JSON, {"bandwidth": {"size", "one_time_burst",
// "refill_time"}, "ops": {...}}: read strictly where one comes in (an API body, a
// --config-file, a snapshot's configuration) and written where one goes out (GET
// /vm/config, a snapshot). refill_time is in milliseconds.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "vmm/common/error.h"
#include "vmm/common/json_object.h"
#include "vmm/devices/rate_limiter_config.h"

namespace dsec::devices {

// The field `name` of `object`: nullopt when absent (or null, where the object takes nulls
// for absent). Each bucket may be left out; a bucket needs size and refill_time, and
// one_time_burst is optional (0). A field of the wrong type (a negative or fractional
// number, a string) or an unknown field is refused by name.
Result<std::optional<RateLimiterConfig>> optional_rate_limiter(JsonObject& object,
                                                               const char* name);

// The same shape, with the buckets configured (a bucket left out is left out).
nlohmann::json rate_limiter_json(const RateLimiterConfig& config);

}  // namespace dsec::devices

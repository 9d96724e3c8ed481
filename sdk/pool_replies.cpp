#include "sdk/pool_replies.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "vmm/common/json_object.h"
#include "vmm/pool/state_records.h"

namespace dsec::sdk::detail {
namespace {

// A count of seconds or milliseconds that fits a std::chrono duration.
dsec::Result<int64_t> duration_count(uint64_t value, const char* name) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return fail(fmt::format("'{}' is out of range: {}", name, value));
  }
  return static_cast<int64_t>(value);
}

dsec::Result<std::optional<std::chrono::milliseconds>> optional_ms(JsonObject& object,
                                                                   const char* name) {
  const auto value = DSEC_TRY(object.optional_unsigned_int(name));
  if (!value) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(DSEC_TRY(duration_count(*value, name)));
}

dsec::Result<std::chrono::seconds> seconds_field(JsonObject& object, const char* name) {
  return std::chrono::seconds(DSEC_TRY(duration_count(DSEC_TRY(object.unsigned_int(name)), name)));
}

PoolSandboxState sdk_state(pool::SandboxState state) {
  switch (state) {
    case pool::SandboxState::kStarting:
      return PoolSandboxState::kStarting;
    case pool::SandboxState::kReady:
      return PoolSandboxState::kReady;
    case pool::SandboxState::kInUse:
      return PoolSandboxState::kInUse;
    case pool::SandboxState::kStopping:
      return PoolSandboxState::kStopping;
  }
  return PoolSandboxState::kStopping;
}

dsec::Result<PoolImage> image_fields(JsonObject& object) {
  PoolImage image;
  image.name = DSEC_TRY(object.string("name"));
  image.ready = DSEC_TRY(object.unsigned_int32("ready"));
  image.max = DSEC_TRY(object.unsigned_int32("max"));
  image.ttl = DSEC_TRY(seconds_field(object, "ttl_s"));
  image.idle_timeout = DSEC_TRY(seconds_field(object, "idle_timeout_s"));
  return image;
}

dsec::Result<PoolImageStatus> image_status_of(const nlohmann::json& value) {
  auto object = DSEC_TRY(JsonObject::of(value, "an image"));
  PoolImageStatus status;
  status.image = DSEC_TRY(image_fields(object));
  status.guest_memory_bytes = DSEC_TRY(object.unsigned_int("guest_memory_bytes"));
  auto counts = DSEC_TRY(JsonObject::of(DSEC_TRY(object.object("sandboxes")),
                                        "image " + status.image.name + "'s sandboxes"));
  status.starting = DSEC_TRY(counts.unsigned_int32("starting"));
  status.ready = DSEC_TRY(counts.unsigned_int32("ready"));
  status.in_use = DSEC_TRY(counts.unsigned_int32("in_use"));
  status.stopping = DSEC_TRY(counts.unsigned_int32("stopping"));
  return status;
}

// The array in `value`'s field `name`, each item read by `read`.
template <typename T, typename Read>
dsec::Result<std::vector<T>> list_of(const nlohmann::json& value, const char* name, Read read) {
  auto object = DSEC_TRY(JsonObject::of(value, "the answer"));
  const auto array = DSEC_TRY(object.array(name));
  std::vector<T> items;
  items.reserve(array.size());
  for (const auto& item : array) {
    items.push_back(DSEC_TRY(read(item)));
  }
  return items;
}

}  // namespace

dsec::Result<PoolSandbox> pool_sandbox_of(const nlohmann::json& value) {
  auto object = DSEC_TRY(JsonObject::of(value, "a sandbox"));
  PoolSandbox sandbox;
  sandbox.id = DSEC_TRY(object.string("id"));
  sandbox.image = DSEC_TRY(object.string("image"));
  sandbox.state = sdk_state(DSEC_TRY(pool::state_of(DSEC_TRY(object.string("state")))));
  const uint32_t pid = DSEC_TRY(object.unsigned_int32("pid"));
  if (pid == 0 || pid > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return fail(fmt::format("sandbox {}: 'pid' {} is no process id", sandbox.id, pid));
  }
  sandbox.pid = static_cast<int>(pid);
  sandbox.vsock_path = DSEC_TRY(object.string("vsock"));
  sandbox.expires_in = DSEC_TRY(optional_ms(object, "expires_in_ms"));
  sandbox.idle_timeout = DSEC_TRY(optional_ms(object, "idle_timeout_ms"));
  sandbox.paused = DSEC_TRY(object.optional_boolean("paused")).value_or(false);
  return sandbox;
}

dsec::Result<std::vector<PoolSandbox>> pool_sandboxes_of(const nlohmann::json& value) {
  return list_of<PoolSandbox>(value, "sandboxes", pool_sandbox_of);
}

dsec::Result<PoolImage> pool_image_of(const nlohmann::json& value) {
  auto object = DSEC_TRY(JsonObject::of(value, "the image"));
  return image_fields(object);
}

dsec::Result<std::vector<PoolImageStatus>> pool_images_of(const nlohmann::json& value) {
  return list_of<PoolImageStatus>(value, "images", image_status_of);
}

nlohmann::json pool_image_body(const PoolImage& image) {
  nlohmann::json body = {{"ready", image.ready},
                         {"ttl_s", image.ttl.count()},
                         {"idle_timeout_s", image.idle_timeout.count()}};
  if (image.max != 0) {
    body["max"] = image.max;
  }
  return body;
}

nlohmann::json acquire_body(const AcquireOptions& options) {
  nlohmann::json body = {{"image", options.image}};
  if (options.ttl) {
    body["ttl_s"] = options.ttl->count();
  }
  if (options.idle_timeout) {
    body["idle_timeout_s"] = options.idle_timeout->count();
  }
  return body;
}

}  // namespace dsec::sdk::detail

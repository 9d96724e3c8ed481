#include "vmm/pool/pool_requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "vmm/common/json_object.h"
#include "vmm/network/network_json.h"
#include "vmm/pool/image_store.h"

namespace dsec::pool {
namespace {

constexpr size_t kMaxNameLength = 64;
// An exec's time limit when the request names none: the daemon answers nothing else while
// an exec runs (docs/pool.md), so none runs unbounded.
constexpr uint32_t kDefaultExecTimeoutMs = 60'000;

Result<std::vector<std::string>> string_array(const nlohmann::json& array, const char* name) {
  if (array.size() > kMaxExecArgs) {
    return fail(
        fmt::format("'{}' has {} entries; at most {} are taken", name, array.size(), kMaxExecArgs));
  }
  std::vector<std::string> out;
  out.reserve(array.size());
  for (const auto& item : array) {
    if (!item.is_string()) {
      return fail(fmt::format("'{}' must be an array of strings", name));
    }
    auto text = item.get<std::string>();
    if (text.find('\0') != std::string::npos) {
      return fail(fmt::format("'{}' holds a string with a NUL byte", name));
    }
    out.push_back(std::move(text));
  }
  return out;
}

// An idle timeout within the bounds a time to live has.
Result<std::optional<uint64_t>> idle_timeout(std::optional<uint64_t> seconds) {
  if (seconds && *seconds > kMaxTtlSeconds) {
    return fail(
        fmt::format("'idle_timeout_s' must be at most {} (a week); 0 means none", kMaxTtlSeconds));
  }
  return seconds;
}

// Images and snapshots are named, never given as paths: the daemon's image store holds them.
Status refuse_snapshot_dir(const JsonObject& body, std::string_view name) {
  if (body.has("snapshot_dir")) {
    return fail(
        "'snapshot_dir' is gone: images live in the daemon's image store (--image-dir) "
        "and are named, never given as paths",
        "put the image in the store as " + std::string(name.empty() ? "NAME" : name) +
            " (dsec-vmm warm --out IMAGE_DIR/" + std::string(name.empty() ? "NAME" : name) +
            "), and leave 'snapshot_dir' out");
  }
  return ok();
}

Result<ImageSpec> read_image_fields(JsonObject& body, std::string name) {
  ImageSpec spec;
  spec.name = std::move(name);
  DSEC_TRY(check_image_name(spec.name));
  DSEC_TRY(refuse_snapshot_dir(body, spec.name));
  const uint64_t ready = DSEC_TRY(body.optional_unsigned_int("ready")).value_or(0);
  const uint64_t max =
      DSEC_TRY(body.optional_unsigned_int("max")).value_or(std::max<uint64_t>(ready, 1));
  if (ready > kMaxClonesPerImage || max > kMaxClonesPerImage || max == 0) {
    return fail(fmt::format("'ready' and 'max' must be at most {}, and 'max' at least 1",
                            kMaxClonesPerImage));
  }
  spec.ready = static_cast<uint32_t>(ready);
  spec.max = static_cast<uint32_t>(max);
  if (spec.ready > spec.max) {
    return fail(fmt::format("'ready' ({}) is more than 'max' ({}): lower 'ready' or raise 'max'",
                            spec.ready, spec.max));
  }
  spec.ttl_s = DSEC_TRY(body.optional_unsigned_int("ttl_s")).value_or(0);
  if (spec.ttl_s > kMaxTtlSeconds) {
    return fail(fmt::format("'ttl_s' must be at most {} (a week); 0 means none", kMaxTtlSeconds));
  }
  spec.idle_timeout_s =
      DSEC_TRY(idle_timeout(DSEC_TRY(body.optional_unsigned_int("idle_timeout_s")))).value_or(0);
  // The operator's: it may name reserved destinations on purpose.
  if (const auto egress = DSEC_TRY(body.optional_object("egress"))) {
    spec.egress = DSEC_TRY(network::parse_egress_json(*egress, network::ReservedAllow::kAllowed));
  }
  spec.net_rate_limits = DSEC_TRY(network::read_clone_rate_limits(body));
  return spec;
}

}  // namespace

Status check_name(std::string_view name, std::string_view what) {
  const bool fits = !name.empty() && name.size() <= kMaxNameLength &&
                    std::all_of(name.begin(), name.end(),
                                [](char c) {
                                  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                         (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
                                }) &&
                    name.front() != '.';
  if (!fits) {
    return fail(
        fmt::format("{} must be 1 to {} letters, digits, '-', '_' or '.', not starting "
                    "with '.'",
                    what, kMaxNameLength));
  }
  return ok();
}

Result<ImageSpec> parse_image_spec(std::string_view name, std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  auto spec = DSEC_TRY(read_image_fields(object, std::string(name)));
  DSEC_TRY(object.finish());
  return spec;
}

nlohmann::json image_spec_json(const ImageSpec& spec) {
  nlohmann::json json = {{"name", spec.name},
                         {"ready", spec.ready},
                         {"max", spec.max},
                         {"ttl_s", spec.ttl_s},
                         {"idle_timeout_s", spec.idle_timeout_s},
                         {"egress", network::egress_json(spec.egress)}};
  network::write_clone_rate_limits(spec.net_rate_limits, json);
  return json;
}

Result<ImageSpec> image_spec_from_json(const nlohmann::json& value) {
  auto object = DSEC_TRY(JsonObject::of(value, "an image"));
  auto name = DSEC_TRY(object.string("name"));
  auto spec = DSEC_TRY(read_image_fields(object, std::move(name)));
  DSEC_TRY(object.finish());
  return spec;
}

Result<AcquireRequest> parse_acquire(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  AcquireRequest request{
      .image = DSEC_TRY(object.string("image")),
      .ttl_s = DSEC_TRY(object.optional_unsigned_int("ttl_s")),
      .idle_timeout_s =
          DSEC_TRY(idle_timeout(DSEC_TRY(object.optional_unsigned_int("idle_timeout_s"))))};
  if (request.ttl_s && *request.ttl_s > kMaxTtlSeconds) {
    return fail(fmt::format("'ttl_s' must be at most {} (a week); 0 means none", kMaxTtlSeconds));
  }
  if (const auto egress = DSEC_TRY(object.optional_object("egress"))) {
    request.egress =
        DSEC_TRY(network::parse_egress_json(*egress, network::ReservedAllow::kRefused));
  }
  DSEC_TRY(object.finish());
  return request;
}

Result<network::EgressPolicy> caller_egress(const network::EgressPolicy& image,
                                            const network::EgressPolicy& caller) {
  network::EgressPolicy policy = caller;
  policy.reserved_allow = image.reserved_allow;
  if (policy.resolver == 0) {
    policy.resolver = image.resolver;
  }
  policy.deny = image.deny;
  policy.deny.insert(policy.deny.end(), caller.deny.begin(), caller.deny.end());
  if (policy.deny.size() > network::kMaxEgressRules) {
    return fail(fmt::format("egress 'deny' has {} rules with the image's {}: more than {}",
                            caller.deny.size(), image.deny.size(), network::kMaxEgressRules),
                "deny fewer destinations");
  }
  return policy;
}

Result<uint16_t> parse_port_forward(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  const uint64_t port = DSEC_TRY(object.unsigned_int("guest_port"));
  DSEC_TRY(object.finish());
  if (port == 0 || port > 65535) {
    return fail(fmt::format("'guest_port' {} is not a port", port), "give 1 to 65535");
  }
  return static_cast<uint16_t>(port);
}

Result<network::EgressPolicy> parse_network_patch(std::string_view body) {
  const auto value = nlohmann::json::parse(body, nullptr, false);
  if (value.is_discarded()) {
    return fail("the body is not JSON",
                "send {\"mode\": \"none\"|\"all\"|\"allow\", \"allow\": [...], \"deny\": [...]}");
  }
  return network::parse_egress_json(value, network::ReservedAllow::kRefused);
}

Result<ExecCall> parse_exec(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  ExecCall call;
  call.request.argv = DSEC_TRY(string_array(DSEC_TRY(object.array("argv")), "argv"));
  if (call.request.argv.empty() || call.request.argv.front().empty()) {
    return fail("'argv' must name a program: [\"program\", \"arg\", ...]");
  }
  if (const auto env = DSEC_TRY(object.optional_array("env"))) {
    call.request.env = DSEC_TRY(string_array(*env, "env"));
    for (const auto& entry : call.request.env) {
      if (entry.find('=') == std::string::npos || entry.front() == '=') {
        return fail("each of 'env' must be NAME=value, not \"" + entry + "\"");
      }
    }
  }
  call.request.cwd = DSEC_TRY(object.optional_string("cwd")).value_or("");
  const uint64_t timeout =
      DSEC_TRY(object.optional_unsigned_int("timeout_ms")).value_or(kDefaultExecTimeoutMs);
  if (timeout == 0 || timeout > kMaxExecTimeoutMs) {
    return fail(fmt::format("'timeout_ms' must be 1 to {} (default {})", kMaxExecTimeoutMs,
                            kDefaultExecTimeoutMs));
  }
  call.request.timeout_ms = static_cast<uint32_t>(timeout);
  if (auto stdin_data = DSEC_TRY(object.optional_string("stdin"))) {
    call.request.stdin_open = true;
    call.stdin_data = std::move(*stdin_data);
  }
  DSEC_TRY(object.finish());
  return call;
}

Result<std::string> parse_snapshot_name(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  DSEC_TRY(refuse_snapshot_dir(object, ""));
  std::string name = DSEC_TRY(object.string("name"));
  DSEC_TRY(object.finish());
  if (auto valid = check_image_name(name); !valid) {
    return fail("'name': " + valid.error().message());
  }
  return name;
}

Result<FileTarget> parse_file_target(std::string_view path, std::string_view mode) {
  if (path.empty() || path.front() != '/' || path.size() > agent::kMaxPathLen ||
      path.find('\0') != std::string_view::npos) {
    return fail("the X-Dsec-Path header must hold the guest file's absolute path",
                "e.g. curl -H 'X-Dsec-Path: /tmp/in.txt' --data-binary @in.txt ...");
  }
  FileTarget target{.guest_path = std::string(path), .mode = 0644};
  if (!mode.empty()) {
    uint32_t bits = 0;
    const auto [end, ec] = std::from_chars(mode.data(), mode.data() + mode.size(), bits, 8);
    if (ec != std::errc() || end != mode.data() + mode.size() || bits > 0777) {
      return fail("the X-Dsec-Mode header must hold permission bits in octal, 0 to 0777 (" +
                  std::string(mode) + " is not)");
    }
    target.mode = bits;
  }
  return target;
}

}  // namespace dsec::pool

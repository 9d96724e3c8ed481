#include "vmm/api/preboot_requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>

#include "vmm/devices/rate_limiter_json.h"

namespace dsec::api {
namespace {

using RateLimiter = devices::RateLimiterConfig;

// An optional string field that must be one of `choices` (compared exactly, or ignoring
// case); nullopt when absent.
Result<std::optional<std::string>> optional_choice(JsonObject& body, const char* name,
                                                   std::initializer_list<const char*> choices,
                                                   bool ignore_case = false) {
  const auto value = DSEC_TRY(body.optional_string(name));
  if (!value) {
    return std::nullopt;
  }
  auto same = [&](std::string_view choice) {
    return ignore_case ? std::ranges::equal(*value, choice,
                                            [](char a, char b) {
                                              return std::tolower(static_cast<unsigned char>(a)) ==
                                                     std::tolower(static_cast<unsigned char>(b));
                                            })
                       : *value == choice;
  };
  std::string listed;
  for (const char* choice : choices) {
    if (same(choice)) {
      return std::string(choice);
    }
    listed += fmt::format("{}\"{}\"", listed.empty() ? "" : ", ", choice);
  }
  return fail(fmt::format("'{}' must be one of {}, not \"{}\"", name, listed, *value));
}

// A flag this VMM has only off: absent or false.
Status refuse_true(JsonObject& body, const char* name, std::string_view why) {
  if (DSEC_TRY(body.optional_boolean(name)).value_or(false)) {
    return fail(fmt::format("'{}': true is not supported: {}", name, why));
  }
  return ok();
}

bool is_id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

// The body's id, which must be a valid id and match the path's.
Result<std::string> resource_id(JsonObject& body, const char* name, PathId path_id) {
  auto id = DSEC_TRY(body.string(name));
  // Firecracker's checked_id sets no length; the request's size bounds it.
  if (!std::ranges::all_of(id, is_id_char)) {
    return fail(
        fmt::format("'{}' \"{}\" is not an id: give letters, digits, '_' or '-'", name, id));
  }
  if (path_id && *path_id != id) {
    return fail(fmt::format("'{}' \"{}\" in the body does not match \"{}\" in the path", name, id,
                            *path_id));
  }
  return id;
}

}  // namespace

Result<JsonObject> parse_body(std::string_view body) {
  return JsonObject::parse(body, "the body", JsonObject::Nulls::kAbsent);
}

Result<BootSourceRequest> parse_boot_source(JsonObject body) {
  BootSourceRequest request;
  request.kernel_image_path = DSEC_TRY(body.string("kernel_image_path"));
  request.initrd_path = DSEC_TRY(body.optional_string("initrd_path")).value_or("");
  request.boot_args = DSEC_TRY(body.optional_string("boot_args", JsonObject::Empty::kAllowed));
  DSEC_TRY(body.finish());
  return request;
}

Result<MachineConfigUpdate> parse_machine_config(JsonObject body, Update update) {
  MachineConfigUpdate request;
  // A PATCH's field left out or null changes nothing (but is still a field it knows).
  if (update == Update::kWhole || body.has("vcpu_count")) {
    request.vcpu_count = DSEC_TRY(body.unsigned_int32("vcpu_count"));
  } else {
    DSEC_TRY(body.optional_unsigned_int("vcpu_count"));
  }
  request.mem_size_mib = update == Update::kWhole
                             ? DSEC_TRY(body.unsigned_int("mem_size_mib"))
                             : DSEC_TRY(body.optional_unsigned_int("mem_size_mib"));
  request.smt = DSEC_TRY(body.optional_boolean("smt"));
  if (update == Update::kWhole) {
    request.smt = request.smt.value_or(false);  // a PUT's default, as Firecracker's
  }
  DSEC_TRY(refuse_true(body, "track_dirty_pages",
                       "dsec-vmm has no diff snapshots (its snapshots are Full)"));
  if (const auto t = DSEC_TRY(body.optional_string("cpu_template")); t && *t != "None") {
    return fail(fmt::format(
        "'cpu_template' \"{}\" is not supported: dsec-vmm has no CPU templates; give \"None\"",
        *t));
  }
  if (const auto pages =
          DSEC_TRY(optional_choice(body, "huge_pages", {"None", "Transparent", "2M"}));
      pages == "2M") {
    return fail(
        "'huge_pages' \"2M\" is not supported: guest memory is anonymous memory advised for "
        "transparent huge pages; give \"None\" or \"Transparent\"");
  }
  DSEC_TRY(body.finish());
  if (update == Update::kPartial && !request.vcpu_count && !request.mem_size_mib && !request.smt &&
      !body.has("track_dirty_pages") && !body.has("cpu_template") && !body.has("huge_pages")) {
    return fail("the body changes nothing: give at least one field of the machine configuration");
  }
  return request;
}

Result<DriveRequest> parse_drive(JsonObject body, PathId path_id) {
  DriveRequest request;
  request.drive_id = DSEC_TRY(resource_id(body, "drive_id", path_id));
  request.is_root_device = DSEC_TRY(body.boolean("is_root_device"));
  request.partuuid = DSEC_TRY(body.optional_string("partuuid")).value_or("");
  DSEC_TRY(body.refuse("socket", "dsec-vmm has no vhost-user-block; give path_on_host"));
  request.path_on_host = DSEC_TRY(body.string("path_on_host"));
  request.is_read_only = DSEC_TRY(body.optional_boolean("is_read_only")).value_or(false);
  DSEC_TRY(optional_choice(body, "cache_type", {"Unsafe", "Writeback"}));
  DSEC_TRY(optional_choice(body, "io_engine", {"Sync", "Async"}));
  request.rate_limiter =
      DSEC_TRY(devices::optional_rate_limiter(body, "rate_limiter")).value_or(RateLimiter{});
  DSEC_TRY(body.finish());
  return request;
}

Result<NetworkInterfaceRequest> parse_network_interface(JsonObject body, PathId path_id) {
  NetworkInterfaceRequest request;
  request.iface_id = DSEC_TRY(resource_id(body, "iface_id", path_id));
  request.host_dev_name = DSEC_TRY(body.string("host_dev_name"));
  request.guest_mac = DSEC_TRY(body.optional_string("guest_mac")).value_or("");
  request.rx_rate_limiter =
      DSEC_TRY(devices::optional_rate_limiter(body, "rx_rate_limiter")).value_or(RateLimiter{});
  request.tx_rate_limiter =
      DSEC_TRY(devices::optional_rate_limiter(body, "tx_rate_limiter")).value_or(RateLimiter{});
  DSEC_TRY(body.refuse("mtu", "dsec-vmm's virtio-net does not offer an MTU; leave it out"));
  DSEC_TRY(body.finish());
  return request;
}

namespace {

Result<RateLimiterUpdate> rate_limiter_update(JsonObject& body, const char* name) {
  const auto given = DSEC_TRY(devices::optional_rate_limiter(body, name));
  if (!given) {
    return RateLimiterUpdate{};
  }
  return RateLimiterUpdate{given->bandwidth, given->ops};
}

}  // namespace

devices::RateLimiterConfig RateLimiterUpdate::applied_to(
    const devices::RateLimiterConfig& current) const {
  return {.bandwidth = bandwidth ? bandwidth : current.bandwidth, .ops = ops ? ops : current.ops};
}

Result<DriveUpdate> parse_drive_update(JsonObject body, PathId path_id) {
  DriveUpdate update;
  update.drive_id = DSEC_TRY(resource_id(body, "drive_id", path_id));
  update.path_on_host = DSEC_TRY(body.optional_string("path_on_host"));
  update.rate_limiter = DSEC_TRY(rate_limiter_update(body, "rate_limiter"));
  DSEC_TRY(body.finish());
  return update;
}

Result<NetworkInterfaceUpdate> parse_network_interface_update(JsonObject body, PathId path_id) {
  NetworkInterfaceUpdate update;
  update.iface_id = DSEC_TRY(resource_id(body, "iface_id", path_id));
  update.rx_rate_limiter = DSEC_TRY(rate_limiter_update(body, "rx_rate_limiter"));
  update.tx_rate_limiter = DSEC_TRY(rate_limiter_update(body, "tx_rate_limiter"));
  DSEC_TRY(body.finish());
  return update;
}

Result<VsockRequest> parse_vsock(JsonObject body) {
  VsockRequest request;
  request.guest_cid = DSEC_TRY(body.unsigned_int("guest_cid"));
  request.uds_path = DSEC_TRY(body.string("uds_path"));
  DSEC_TRY(body.optional_string("vsock_id"));
  DSEC_TRY(body.finish());
  return request;
}

Result<EntropyRequest> parse_entropy(JsonObject body) {
  EntropyRequest request;
  request.rate_limiter =
      DSEC_TRY(devices::optional_rate_limiter(body, "rate_limiter")).value_or(RateLimiter{});
  DSEC_TRY(body.finish());
  return request;
}

Result<LoggerRequest> parse_logger(JsonObject body) {
  LoggerRequest request;
  request.log_path = DSEC_TRY(body.optional_string("log_path")).value_or("");
  // Firecracker's LevelFilter::from_str, which takes "Warn" too.
  constexpr std::array kLevels{
      std::pair{"Error", LogLevel::kError},  std::pair{"Warning", LogLevel::kWarning},
      std::pair{"Warn", LogLevel::kWarning}, std::pair{"Info", LogLevel::kInfo},
      std::pair{"Debug", LogLevel::kDebug},  std::pair{"Trace", LogLevel::kTrace},
      std::pair{"Off", LogLevel::kOff}};
  if (const auto level = DSEC_TRY(optional_choice(
          body, "level", {"Error", "Warning", "Warn", "Info", "Debug", "Trace", "Off"}, true))) {
    request.level = std::ranges::find(kLevels, *level, [](const auto& l) {
                      return std::string_view(l.first);
                    })->second;
  }
  request.show_level = DSEC_TRY(body.optional_boolean("show_level")).value_or(false);
  request.show_log_origin = DSEC_TRY(body.optional_boolean("show_log_origin")).value_or(false);
  DSEC_TRY(body.refuse("module", "dsec-vmm's log has no per-module filter; leave it out"));
  DSEC_TRY(body.finish());
  return request;
}

Result<std::string> parse_metrics(JsonObject body) {
  auto path = DSEC_TRY(body.string("metrics_path"));
  DSEC_TRY(body.finish());
  return path;
}

Result<Action> parse_action(JsonObject body) {
  const auto type = DSEC_TRY(body.string("action_type"));
  DSEC_TRY(body.finish());
  if (type == "InstanceStart") {
    return Action::kInstanceStart;
  }
  if (type == "SendCtrlAltDel") {
    return Action::kSendCtrlAltDel;
  }
  if (type == "FlushMetrics") {
    return Action::kFlushMetrics;
  }
  return fail(fmt::format(
      "'action_type' must be \"InstanceStart\", \"SendCtrlAltDel\" or \"FlushMetrics\", not \"{}\"",
      type));
}

}  // namespace dsec::api

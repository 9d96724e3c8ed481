#include "vmm/api/vm_requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "vmm/common/json_object.h"

namespace dsec::api {

using dsec::JsonObject;

Result<VmStateChange> parse_vm_state(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  const auto state = DSEC_TRY(object.string("state"));
  DSEC_TRY(object.finish());
  if (state == "Paused") {
    return VmStateChange::kPause;
  }
  if (state == "Resumed") {
    return VmStateChange::kResume;
  }
  return fail(fmt::format("'state' must be \"Paused\" or \"Resumed\", not \"{}\"", state));
}

Result<SnapshotCreateRequest> parse_snapshot_create(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  const auto type = DSEC_TRY(object.optional_string("snapshot_type"));
  SnapshotCreateRequest request;
  request.snapshot_path = DSEC_TRY(object.string("snapshot_path"));
  request.mem_file_path = DSEC_TRY(object.string("mem_file_path"));
  DSEC_TRY(object.finish());
  if (type && *type != "Full") {
    if (*type == "Diff") {
      return fail("snapshot_type \"Diff\" is not supported: dsec-vmm writes Full snapshots");
    }
    return fail(fmt::format("'snapshot_type' must be \"Full\", not \"{}\"", *type));
  }
  if (request.snapshot_path == request.mem_file_path) {
    return fail("'snapshot_path' and 'mem_file_path' name the same file: give two files");
  }
  return request;
}

namespace {

Result<std::string> memory_backend(const nlohmann::json& value) {
  auto backend = DSEC_TRY(JsonObject::of(value, "mem_backend"));
  const auto type = DSEC_TRY(backend.string("backend_type"));
  auto path = DSEC_TRY(backend.string("backend_path"));
  DSEC_TRY(backend.finish());
  if (type == "Uffd") {
    return fail(
        "mem_backend \"Uffd\" is not supported: give backend_type \"File\" (the memory file is "
        "mapped copy-on-write)");
  }
  if (type != "File") {
    return fail(fmt::format("'backend_type' in mem_backend must be \"File\", not \"{}\"", type));
  }
  return path;
}

Result<std::vector<NetworkOverride>> network_overrides(const nlohmann::json& list) {
  std::vector<NetworkOverride> overrides;
  for (size_t i = 0; i < list.size(); ++i) {
    auto entry = DSEC_TRY(JsonObject::of(list[i], fmt::format("network_overrides[{}]", i)));
    NetworkOverride o;
    o.iface_id = DSEC_TRY(entry.string("iface_id"));
    o.host_dev_name = DSEC_TRY(entry.string("host_dev_name"));
    DSEC_TRY(entry.finish());
    overrides.push_back(std::move(o));
  }
  return overrides;
}

// Firecracker's flags for diff snapshots of the loaded VM: only "off" is possible here.
Status refuse_dirty_tracking(JsonObject& body, const char* name) {
  if (DSEC_TRY(body.optional_boolean(name)).value_or(false)) {
    return fail(fmt::format("'{}': true is not supported: dsec-vmm has no diff snapshots", name));
  }
  return ok();
}

}  // namespace

Result<SnapshotLoadRequest> parse_snapshot_load(std::string_view body) {
  auto object = DSEC_TRY(JsonObject::parse(body));
  SnapshotLoadRequest request;
  request.snapshot_path = DSEC_TRY(object.string("snapshot_path"));
  const auto backend = DSEC_TRY(object.optional_object("mem_backend"));
  const auto mem_file = DSEC_TRY(object.optional_string("mem_file_path"));
  request.resume_vm = DSEC_TRY(object.optional_boolean("resume_vm")).value_or(false);
  DSEC_TRY(refuse_dirty_tracking(object, "enable_diff_snapshots"));
  DSEC_TRY(refuse_dirty_tracking(object, "track_dirty_pages"));
  if (const auto list = DSEC_TRY(object.optional_array("network_overrides"))) {
    request.network_overrides = DSEC_TRY(network_overrides(*list));
  }
  if (const auto vsock = DSEC_TRY(object.optional_object("vsock_override"))) {
    auto o = DSEC_TRY(JsonObject::of(*vsock, "vsock_override"));
    request.vsock_uds_path = DSEC_TRY(o.string("uds_path"));
    DSEC_TRY(o.finish());
  }
  DSEC_TRY(object.finish());
  if (backend.has_value() == mem_file.has_value()) {
    return fail(
        "give exactly one of 'mem_backend' ({\"backend_type\": \"File\", \"backend_path\": ...}) "
        "and the older 'mem_file_path'");
  }
  request.mem_file_path = backend ? DSEC_TRY(memory_backend(*backend)) : *mem_file;
  return request;
}

machine::RestoreOverrides restore_overrides(const SnapshotLoadRequest& request) {
  machine::RestoreOverrides overrides;
  overrides.vsock_uds_path = request.vsock_uds_path;
  // Each names its interface; the restore checks that the snapshot has it, and has one
  // override at most for each.
  for (const auto& o : request.network_overrides) {
    overrides.nets.push_back({.iface_id = o.iface_id, .tap = o.host_dev_name});
  }
  return overrides;
}

std::optional<std::string> deprecation_of(http::Method method, std::string_view pattern,
                                          std::string_view body) {
  // Firecracker's api_server/request/{machine_configuration,vsock,snapshot}.rs (v1.16.1).
  struct Deprecated {
    http::Method method;
    std::string_view pattern;
    std::string_view field;
    std::string_view message;
  };
  static constexpr std::array kDeprecated{
      Deprecated{http::Method::kPut, "/machine-config", "cpu_template",
                 "PUT /machine-config: cpu_template field is deprecated."},
      Deprecated{http::Method::kPatch, "/machine-config", "cpu_template",
                 "PATCH /machine-config: cpu_template field is deprecated."},
      Deprecated{http::Method::kPut, "/vsock", "vsock_id",
                 "PUT /vsock: vsock_id field is deprecated."},
      Deprecated{http::Method::kPut, "/snapshot/load", "mem_file_path",
                 "PUT /snapshot/load: mem_file_path and enable_diff_snapshots fields are "
                 "deprecated."},
      Deprecated{http::Method::kPut, "/snapshot/load", "enable_diff_snapshots",
                 "PUT /snapshot/load: mem_file_path and enable_diff_snapshots fields are "
                 "deprecated."},
  };
  const auto route = [&](const Deprecated& d) { return d.method == method && d.pattern == pattern; };
  if (std::ranges::none_of(kDeprecated, route)) {
    return std::nullopt;  // most bodies are not parsed again
  }
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return std::nullopt;
  }
  for (const Deprecated& d : kDeprecated) {
    const auto field = json.find(d.field);
    if (!route(d) || field == json.end() || field->is_null() || *field == false) {
      continue;
    }
    return std::string(d.message);
  }
  return std::nullopt;
}

}  // namespace dsec::api

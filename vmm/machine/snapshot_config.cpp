#include "vmm/machine/snapshot_config.h"

#include <nlohmann/json.hpp>
#include <set>

namespace dsec::machine {
namespace {

using nlohmann::json;

constexpr uint32_t kFormat = 1;

Status only_fields(const json& object, const char* what, const std::set<std::string>& known) {
  if (!object.is_object()) {
    return fail(std::string("snapshot config: ") + what + " is not a JSON object",
                "the state file is corrupt");
  }
  for (const auto& [key, value] : object.items()) {
    if (!known.contains(key)) {
      return fail(std::string("snapshot config: unknown field '") + key + "' in " + what,
                  "the snapshot was taken by a newer dsec-vmm: restore it with that one");
    }
  }
  return ok();
}

template <typename T>
Result<T> field(const json& object, const char* name, const char* what) {
  const auto it = object.find(name);
  if (it == object.end()) {
    return fail(std::string("snapshot config: ") + what + " has no '" + name + "'",
                "the state file is corrupt");
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fail(std::string("snapshot config: '") + name + "' in " + what + " has the wrong type",
                "the state file is corrupt");
  }
}

}  // namespace

std::string snapshot_config_to_json(const MachineConfig& config) {
  json j;
  j["format"] = kFormat;
  j["vcpus"] = config.vcpus;
  j["memory_mib"] = config.memory_mib;
  j["expect_clean_shutdown_announcement"] = config.expect_clean_shutdown_announcement;
  j["drives"] = json::array();
  for (const auto& d : config.drives) {
    j["drives"].push_back({{"path", d.path}, {"read_only", d.read_only}, {"id", d.id}});
  }
  if (config.vsock) {
    j["vsock"] = {{"guest_cid", config.vsock->guest_cid}, {"uds_path", config.vsock->uds_path}};
  }
  if (config.net) {
    j["net"] = {
        {"tap", config.net->tap}, {"host_cidr", config.net->host_cidr}, {"mac", config.net->mac}};
  }
  j["rng"] = config.rng;
  return j.dump();
}

Result<MachineConfig> snapshot_config_from_json(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return fail("snapshot config: not valid JSON", "the state file is corrupt");
  }
  DSEC_TRY(only_fields(j, "the configuration",
                       {"format", "vcpus", "memory_mib", "expect_clean_shutdown_announcement",
                        "drives", "vsock", "net", "rng"}));
  const auto format = DSEC_TRY(field<uint32_t>(j, "format", "the configuration"));
  if (format != kFormat) {
    return fail("snapshot config: format " + std::to_string(format) + ", this dsec-vmm reads " +
                    std::to_string(kFormat),
                "take the snapshot again with this dsec-vmm");
  }
  MachineConfig config;
  config.vcpus = DSEC_TRY(field<uint32_t>(j, "vcpus", "the configuration"));
  config.memory_mib = DSEC_TRY(field<uint64_t>(j, "memory_mib", "the configuration"));
  config.expect_clean_shutdown_announcement =
      DSEC_TRY(field<bool>(j, "expect_clean_shutdown_announcement", "the configuration"));
  config.rng = DSEC_TRY(field<bool>(j, "rng", "the configuration"));
  const auto drives = DSEC_TRY(field<json>(j, "drives", "the configuration"));
  if (!drives.is_array()) {
    return fail("snapshot config: 'drives' is not an array", "the state file is corrupt");
  }
  for (const auto& d : drives) {
    DSEC_TRY(only_fields(d, "a drive", {"path", "read_only", "id"}));
    config.drives.push_back({.path = DSEC_TRY(field<std::string>(d, "path", "a drive")),
                             .read_only = DSEC_TRY(field<bool>(d, "read_only", "a drive")),
                             .id = DSEC_TRY(field<std::string>(d, "id", "a drive"))});
  }
  if (const auto it = j.find("vsock"); it != j.end()) {
    DSEC_TRY(only_fields(*it, "vsock", {"guest_cid", "uds_path"}));
    config.vsock = VsockConfig{.guest_cid = DSEC_TRY(field<uint64_t>(*it, "guest_cid", "vsock")),
                               .uds_path = DSEC_TRY(field<std::string>(*it, "uds_path", "vsock"))};
  }
  if (const auto it = j.find("net"); it != j.end()) {
    DSEC_TRY(only_fields(*it, "net", {"tap", "host_cidr", "mac"}));
    config.net = NetConfig{.tap = DSEC_TRY(field<std::string>(*it, "tap", "net")),
                           .host_cidr = DSEC_TRY(field<std::string>(*it, "host_cidr", "net")),
                           .mac = DSEC_TRY(field<std::string>(*it, "mac", "net"))};
  }
  return config;
}

Result<MachineConfig> apply_overrides(MachineConfig config, const RestoreOverrides& o) {
  if (o.vsock_uds_path || o.vsock_guest_cid) {
    if (!config.vsock) {
      return fail("--vsock: the snapshot's VM has no vsock device",
                  "restore it without --vsock, or snapshot a VM that has one");
    }
    if (o.vsock_uds_path) {
      config.vsock->uds_path = *o.vsock_uds_path;
    }
    if (o.vsock_guest_cid) {
      config.vsock->guest_cid = *o.vsock_guest_cid;
    }
  }
  if (o.net_tap || o.net_host_cidr || o.net_mac) {
    if (!config.net) {
      return fail("--net: the snapshot's VM has no network device",
                  "restore it without --net, or snapshot a VM that has one");
    }
    config.net->tap = o.net_tap.value_or(config.net->tap);
    config.net->host_cidr = o.net_host_cidr.value_or(config.net->host_cidr);
    config.net->mac = o.net_mac.value_or(config.net->mac);
  }
  if (o.drive_paths.size() > config.drives.size()) {
    return fail("--drive: " + std::to_string(o.drive_paths.size()) +
                    " drives given, the snapshot's VM has " + std::to_string(config.drives.size()),
                "give at most one --drive per drive of the snapshot, in order");
  }
  for (size_t i = 0; i < o.drive_paths.size(); ++i) {
    if (const auto& path = o.drive_paths[i]; path.has_value()) {
      config.drives[i].path = *path;
    }
  }
  return config;
}

}  // namespace dsec::machine

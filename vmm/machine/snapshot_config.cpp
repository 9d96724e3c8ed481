#include "vmm/machine/snapshot_config.h"

#include <nlohmann/json.hpp>

#include "vmm/common/json_object.h"
#include "vmm/devices/rate_limiter_json.h"
#include "vmm/snapshot/state_file.h"

namespace dsec::machine {
namespace {

using nlohmann::json;

constexpr uint32_t kFormat = 1;

Result<MachineConfig> read_config(std::string_view text) {
  auto j = DSEC_TRY(JsonObject::parse(text, "the configuration"));
  const auto format = DSEC_TRY(j.unsigned_int32("format"));
  if (format != kFormat) {
    return fail(
        "format " + std::to_string(format) + ", this dsec-vmm reads " + std::to_string(kFormat),
        "take the snapshot again with this dsec-vmm");
  }
  MachineConfig config;
  config.vcpus = DSEC_TRY(j.unsigned_int32("vcpus"));
  config.smt = DSEC_TRY(j.optional_boolean("smt")).value_or(false);
  config.memory_mib = DSEC_TRY(j.unsigned_int("memory_mib"));
  config.expect_clean_shutdown_announcement =
      DSEC_TRY(j.boolean("expect_clean_shutdown_announcement"));
  config.rng = DSEC_TRY(j.boolean("rng"));
  config.rng_rate_limiter = DSEC_TRY(devices::optional_rate_limiter(j, "rng_rate_limiter"))
                                .value_or(devices::RateLimiterConfig{});
  for (const auto& value : DSEC_TRY(j.array("drives"))) {
    auto d = DSEC_TRY(JsonObject::of(value, "a drive"));
    config.drives.push_back(
        {.path = DSEC_TRY(d.string("path")),
         .read_only = DSEC_TRY(d.boolean("read_only")),
         .id = DSEC_TRY(d.string("id", JsonObject::Empty::kAllowed)),
         .is_root = DSEC_TRY(d.optional_boolean("root")).value_or(false),
         .partuuid = DSEC_TRY(d.optional_string("partuuid")).value_or(""),
         .rate_limiter = DSEC_TRY(devices::optional_rate_limiter(d, "rate_limiter"))
                             .value_or(devices::RateLimiterConfig{})});
    DSEC_TRY(d.finish());
  }
  if (const auto vsock = DSEC_TRY(j.optional_object("vsock"))) {
    auto v = DSEC_TRY(JsonObject::of(*vsock, "vsock"));
    config.vsock = VsockConfig{.guest_cid = DSEC_TRY(v.unsigned_int("guest_cid")),
                               .uds_path = DSEC_TRY(v.string("uds_path"))};
    DSEC_TRY(v.finish());
  }
  if (const auto net = DSEC_TRY(j.optional_object("net"))) {
    auto n = DSEC_TRY(JsonObject::of(*net, "net"));
    config.net =
        NetConfig{.tap = DSEC_TRY(n.string("tap")),
                  .host_cidr = DSEC_TRY(n.string("host_cidr", JsonObject::Empty::kAllowed)),
                  .mac = DSEC_TRY(n.string("mac", JsonObject::Empty::kAllowed)),
                  .tap_fd = -1,
                  .id = DSEC_TRY(n.optional_string("id")).value_or(""),
                  .rx_rate_limiter = DSEC_TRY(devices::optional_rate_limiter(n, "rx_rate_limiter"))
                                         .value_or(devices::RateLimiterConfig{}),
                  .tx_rate_limiter = DSEC_TRY(devices::optional_rate_limiter(n, "tx_rate_limiter"))
                                         .value_or(devices::RateLimiterConfig{})};
    DSEC_TRY(n.finish());
  }
  DSEC_TRY(j.finish());
  return config;
}

}  // namespace

std::string snapshot_config_to_json(const MachineConfig& config) {
  json j;
  j["format"] = kFormat;
  j["vcpus"] = config.vcpus;
  if (config.smt) {
    j["smt"] = true;  // only when set: snapshots without it read as before
  }
  j["memory_mib"] = config.memory_mib;
  j["expect_clean_shutdown_announcement"] = config.expect_clean_shutdown_announcement;
  j["drives"] = json::array();
  for (const auto& d : config.drives) {
    json drive = {{"path", d.path}, {"read_only", d.read_only}, {"id", d.id}};
    // Written only when set, so that snapshots without them read as before.
    if (d.is_root) {
      drive["root"] = true;
    }
    if (!d.partuuid.empty()) {
      drive["partuuid"] = d.partuuid;
    }
    if (d.rate_limiter != devices::RateLimiterConfig{}) {
      drive["rate_limiter"] = devices::rate_limiter_json(d.rate_limiter);
    }
    j["drives"].push_back(drive);
  }
  if (config.vsock) {
    j["vsock"] = {{"guest_cid", config.vsock->guest_cid}, {"uds_path", config.vsock->uds_path}};
  }
  if (config.net) {
    j["net"] = {
        {"tap", config.net->tap}, {"host_cidr", config.net->host_cidr}, {"mac", config.net->mac}};
    if (!config.net->id.empty()) {
      j["net"]["id"] = config.net->id;
    }
    for (const auto& [name, limiter] :
         {std::pair{"rx_rate_limiter", &config.net->rx_rate_limiter},
          std::pair{"tx_rate_limiter", &config.net->tx_rate_limiter}}) {
      if (*limiter != devices::RateLimiterConfig{}) {
        j["net"][name] = devices::rate_limiter_json(*limiter);
      }
    }
  }
  j["rng"] = config.rng;
  if (config.rng_rate_limiter != devices::RateLimiterConfig{}) {
    j["rng_rate_limiter"] = devices::rate_limiter_json(config.rng_rate_limiter);
  }
  return j.dump();
}

Result<MachineConfig> snapshot_config_from_json(std::string_view text) {
  auto config = read_config(text);
  if (!config) {
    const Error& e = config.error();
    return std::unexpected(Error("snapshot config: " + e.what(), e.os_errno(),
                                 e.hint().empty() ? "the state file is corrupt, or was written "
                                                    "by another version of dsec-vmm"
                                                  : e.hint()));
  }
  return config;
}

namespace {

// Under refuse_snapshot_host_paths: what the state file names on the host and the
// overrides do not replace is refused, naming it, before anything is opened.
Status check_no_host_path_from_snapshot(MachineConfig& config, const RestoreOverrides& o) {
  constexpr const char* kHint =
      "a snapshot's state file is not trusted to choose host files: give the clone's own "
      "with --drive, --vsock and --net";
  for (size_t i = 0; i < config.drives.size(); ++i) {
    if (i >= o.drive_paths.size() || !o.drive_paths[i].has_value()) {
      return fail("the snapshot's drive " + std::to_string(i + 1) + " ('" + config.drives[i].id +
                      "') names the host file " + config.drives[i].path +
                      ", and no --drive replaces it",
                  kHint);
    }
  }
  if (config.vsock && !o.vsock_uds_path) {
    return fail("the snapshot's vsock device names the host socket " + config.vsock->uds_path +
                    ", and no --vsock replaces it",
                kHint);
  }
  if (config.net) {
    if (!o.net_tap && !o.net_tap_fd) {
      return fail("the snapshot's network device names the host TAP " + config.net->tap +
                      ", and no --net replaces it",
                  kHint);
    }
    config.net->host_cidr = o.net_host_cidr.value_or("");
  }
  return ok();
}

}  // namespace

Result<MachineConfig> read_snapshot_config(const std::string& state_path) {
  const auto file = DSEC_TRY(snapshot::StateFile::load(state_path));
  const auto config = DSEC_TRY(file.section("config"));
  auto parsed =
      snapshot_config_from_json({reinterpret_cast<const char*>(config.data()), config.size()});
  if (!parsed) {
    return std::unexpected(parsed.error().with_context("snapshot state file " + state_path));
  }
  return parsed;
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
  if (o.net_tap || o.net_tap_fd || o.net_host_cidr || o.net_mac || o.net_iface_id) {
    if (!config.net) {
      return fail("--net: the snapshot's VM has no network device",
                  "restore it without --net, or snapshot a VM that has one");
    }
    if (o.net_iface_id && *o.net_iface_id != config.net->iface_id()) {
      return fail("no network interface '" + *o.net_iface_id + "': the snapshot's VM has '" +
                      config.net->iface_id() + "'",
                  "name the interface by its iface_id");
    }
    if (o.net_tap_fd) {
      // A TAP handed in replaces the snapshot's by name, and its address is not ours.
      config.net->tap.clear();
      config.net->host_cidr.clear();
      config.net->tap_fd = *o.net_tap_fd;
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
  if (o.refuse_snapshot_host_paths) {
    DSEC_TRY(check_no_host_path_from_snapshot(config, o));
  }
  return config;
}

}  // namespace dsec::machine

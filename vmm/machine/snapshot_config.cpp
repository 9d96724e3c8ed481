#include "vmm/machine/snapshot_config.h"

#include <nlohmann/json.hpp>

#include "vmm/common/json_object.h"
#include "vmm/devices/rate_limiter_json.h"
#include "vmm/snapshot/state_file.h"

namespace dsec::machine {
namespace {

using nlohmann::json;

constexpr uint32_t kFormat = 1;

Result<NetConfig> read_net(const json& value) {
  auto n = DSEC_TRY(JsonObject::of(value, "net"));
  NetConfig net{.tap = DSEC_TRY(n.string("tap")),
                .host_cidr = DSEC_TRY(n.string("host_cidr", JsonObject::Empty::kAllowed)),
                .mac = DSEC_TRY(n.string("mac", JsonObject::Empty::kAllowed)),
                .tap_fd = -1,
                .id = DSEC_TRY(n.optional_string("id")).value_or(""),
                .rx_rate_limiter = DSEC_TRY(devices::optional_rate_limiter(n, "rx_rate_limiter"))
                                       .value_or(devices::RateLimiterConfig{}),
                .tx_rate_limiter = DSEC_TRY(devices::optional_rate_limiter(n, "tx_rate_limiter"))
                                       .value_or(devices::RateLimiterConfig{})};
  DSEC_TRY(n.finish());
  return net;
}

json net_json(const NetConfig& net) {
  json j = {{"tap", net.tap}, {"host_cidr", net.host_cidr}, {"mac", net.mac}};
  if (!net.id.empty()) {
    j["id"] = net.id;
  }
  for (const auto& [name, limiter] : {std::pair{"rx_rate_limiter", &net.rx_rate_limiter},
                                      std::pair{"tx_rate_limiter", &net.tx_rate_limiter}}) {
    if (*limiter != devices::RateLimiterConfig{}) {
      j[name] = devices::rate_limiter_json(*limiter);
    }
  }
  return j;
}

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
  // "nets" lists the interfaces; snapshots older than it have one, as "net".
  if (const auto net = DSEC_TRY(j.optional_object("net"))) {
    config.nets.push_back(DSEC_TRY(read_net(*net)));
  }
  if (const auto nets = DSEC_TRY(j.optional_array("nets"))) {
    if (!config.nets.empty()) {
      return fail("both \"net\" and \"nets\"");
    }
    for (const auto& net : *nets) {
      config.nets.push_back(DSEC_TRY(read_net(net)));
    }
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
  // One interface is written as "net", so that a dsec-vmm older than "nets" reads it.
  if (config.nets.size() == 1) {
    j["net"] = net_json(config.nets.front());
  } else if (!config.nets.empty()) {
    j["nets"] = json::array();
    for (const auto& net : config.nets) {
      j["nets"].push_back(net_json(net));
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

// The override for interface `index` of config.nets; nullptr without one. An override
// without an iface_id is the first interface's. (apply_overrides checked them first.)
const NetOverride* net_override(const MachineConfig& config, const RestoreOverrides& o,
                                size_t index) {
  for (const auto& given : o.nets) {
    if (given.iface_id ? *given.iface_id == config.nets[index].iface_id() : index == 0) {
      return &given;
    }
  }
  return nullptr;
}

// The index in config.nets of the interface `given` is for, or why there is none.
Result<size_t> net_override_index(const MachineConfig& config, const NetOverride& given) {
  if (config.nets.empty()) {
    return fail("--net: the snapshot's VM has no network device",
                "restore it without --net, or snapshot a VM that has one");
  }
  if (!given.iface_id) {
    return 0;
  }
  std::string ids;
  for (size_t i = 0; i < config.nets.size(); ++i) {
    if (config.nets[i].iface_id() == *given.iface_id) {
      return i;
    }
    ids += (ids.empty() ? "'" : ", '") + config.nets[i].iface_id() + "'";
  }
  return fail("no network interface '" + *given.iface_id + "': the snapshot's VM has " + ids,
              "name the interface by its iface_id");
}

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
  for (size_t i = 0; i < config.nets.size(); ++i) {
    NetConfig& net = config.nets[i];
    const NetOverride* given = net_override(config, o, i);
    if (given == nullptr || (!given->tap && !given->tap_fd)) {
      return fail("the snapshot's network device '" + net.iface_id() + "' names the host TAP " +
                      net.tap + ", and no --net replaces it",
                  kHint);
    }
    net.host_cidr = given->host_cidr.value_or("");
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
  std::vector<bool> overridden(config.nets.size(), false);
  for (const auto& given : o.nets) {
    const size_t index = DSEC_TRY(net_override_index(config, given));
    NetConfig& net = config.nets[index];
    if (overridden[index]) {
      return fail("two network overrides for interface '" + net.iface_id() + "'",
                  "give each interface at most one");
    }
    overridden[index] = true;
    if (given.tap_fd) {
      // A TAP handed in replaces the snapshot's by name, and its address is not ours.
      net.tap.clear();
      net.host_cidr.clear();
      net.tap_fd = *given.tap_fd;
    }
    net.tap = given.tap.value_or(net.tap);
    net.host_cidr = given.host_cidr.value_or(net.host_cidr);
    net.mac = given.mac.value_or(net.mac);
    net.rx_rate_limiter = given.rx_rate_limiter.value_or(net.rx_rate_limiter);
    net.tx_rate_limiter = given.tx_rate_limiter.value_or(net.tx_rate_limiter);
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

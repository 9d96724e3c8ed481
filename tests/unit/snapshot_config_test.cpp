// The configuration a snapshot keeps: written and read back whole, and a corrupt one
// (wrong type, unknown or missing field, a number past its type) refused by name.
#include "vmm/machine/snapshot_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "tests/support/result_matchers.h"

namespace dsec::machine {
namespace {

using ::testing::HasSubstr;

MachineConfig full_config() {
  MachineConfig c;
  c.vcpus = 3;
  c.memory_mib = 384;
  c.expect_clean_shutdown_announcement = true;
  c.rng = true;
  c.drives = {{.path = "/d/a.img", .read_only = true, .id = ""},
              {.path = "/d/b.img", .read_only = false, .id = "scratch"}};
  c.vsock = VsockConfig{.guest_cid = 9, .uds_path = "/run/v.sock"};
  c.nets = {NetConfig{.tap = "tap1", .host_cidr = "", .mac = "52:54:00:00:00:01"}};
  return c;
}

TEST(SnapshotConfig, ReadsBackWhatItWrote) {
  const auto c = full_config();
  ASSERT_OK_AND_ASSIGN(auto back, snapshot_config_from_json(snapshot_config_to_json(c)));
  EXPECT_EQ(back.vcpus, 3u);
  EXPECT_EQ(back.memory_mib, 384u);
  EXPECT_TRUE(back.expect_clean_shutdown_announcement);
  EXPECT_TRUE(back.rng);
  EXPECT_EQ(back.drives, c.drives);
  EXPECT_EQ(back.vsock, c.vsock);
  EXPECT_EQ(back.nets, c.nets);
  MachineConfig bare;
  ASSERT_OK_AND_ASSIGN(auto none, snapshot_config_from_json(snapshot_config_to_json(bare)));
  EXPECT_FALSE(none.vsock);
  EXPECT_TRUE(none.nets.empty());
  EXPECT_TRUE(none.drives.empty());
}

TEST(SnapshotConfig, RefusesACorruptConfigurationByName) {
  auto with = [](const std::function<void(nlohmann::json&)>& change) {
    auto j = nlohmann::json::parse(snapshot_config_to_json(full_config()));
    change(j);
    const auto r = snapshot_config_from_json(j.dump());
    return r ? std::string("(accepted)") : r.error().message();
  };
  EXPECT_THAT(with([](auto& j) { j["vcpus"] = "3"; }),
              HasSubstr("snapshot config: 'vcpus' in the configuration must be a non-negative "
                        "integer, not a string; the state file is corrupt"));
  EXPECT_THAT(with([](auto& j) { j["vcpus"] = uint64_t{1} << 32; }),
              HasSubstr("more than 32 bits hold"));
  EXPECT_THAT(with([](auto& j) { j["extra"] = 1; }), HasSubstr("unknown field 'extra'"));
  EXPECT_THAT(with([](auto& j) { j.erase("memory_mib"); }),
              HasSubstr("'memory_mib' is missing in the configuration"));
  EXPECT_THAT(with([](auto& j) { j["drives"][0]["path"] = ""; }),
              HasSubstr("'path' in a drive must not be empty"));
  EXPECT_THAT(with([](auto& j) { j["vsock"]["port"] = 1; }),
              HasSubstr("unknown field 'port' in vsock"));
  EXPECT_THAT(with([](auto& j) { j["format"] = 2; }),
              HasSubstr("format 2, this dsec-vmm reads 1; take the snapshot again"));
  EXPECT_THAT(snapshot_config_from_json("{").error().message(),
              HasSubstr("snapshot config: the configuration is not valid JSON"));
}

TEST(SnapshotConfig, ATapHandedInReplacesTheSnapshotsTapByNameAndItsAddress) {
  MachineConfig snapshot = full_config();
  snapshot.nets[0].host_cidr = "10.99.0.1/24";
  RestoreOverrides overrides;
  overrides.nets = {{.tap_fd = 7, .mac = "52:54:00:00:00:02"}};
  ASSERT_OK_AND_ASSIGN(auto clone, apply_overrides(snapshot, overrides));
  ASSERT_EQ(clone.nets.size(), 1u);
  EXPECT_EQ(clone.nets[0].tap_fd, 7);
  EXPECT_EQ(clone.nets[0].tap, "");
  EXPECT_EQ(clone.nets[0].host_cidr, "");
  EXPECT_EQ(clone.nets[0].mac, "52:54:00:00:00:02");
  MachineConfig no_net = full_config();
  no_net.nets.clear();
  const auto refused = apply_overrides(no_net, overrides);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr("the snapshot's VM has no network device"));
}

// The pool's restores: a state file written by a caller names /dev/sda read-write; the
// clone gets only what the overrides give it.
TEST(SnapshotConfig, WithoutHostPathsFromTheSnapshotEveryHostResourceMustBeGiven) {
  MachineConfig snapshot = full_config();
  snapshot.drives[1].path = "/dev/sda";
  snapshot.nets[0].host_cidr = "10.99.0.1/24";
  RestoreOverrides given;
  given.refuse_snapshot_host_paths = true;
  given.drive_paths = {"/pool/base.img", "/pool/sb-1/scratch.img"};
  given.vsock_uds_path = "/pool/sb-1/vsock";
  given.nets = {{.tap = "sb1tap"}};
  ASSERT_OK_AND_ASSIGN(auto clone, apply_overrides(snapshot, given));
  EXPECT_EQ(clone.drives[0].path, "/pool/base.img");
  EXPECT_EQ(clone.drives[1].path, "/pool/sb-1/scratch.img");
  EXPECT_EQ(clone.vsock->uds_path, "/pool/sb-1/vsock");
  EXPECT_EQ(clone.nets[0].tap, "sb1tap");
  EXPECT_EQ(clone.nets[0].host_cidr, "") << "the state's address for the host's TAP is dropped";

  auto refused = [&](const std::function<void(RestoreOverrides&)>& change) {
    RestoreOverrides o = given;
    change(o);
    const auto r = apply_overrides(snapshot, o);
    return r ? std::string("(accepted)") : r.error().message();
  };
  EXPECT_THAT(refused([](auto& o) { o.drive_paths.pop_back(); }),
              HasSubstr("the snapshot's drive 2 ('scratch') names the host file /dev/sda, and no "
                        "--drive replaces it"));
  EXPECT_THAT(refused([](auto& o) { o.drive_paths[1].reset(); }), HasSubstr("/dev/sda"));
  EXPECT_THAT(refused([](auto& o) { o.vsock_uds_path.reset(); }),
              HasSubstr("names the host socket /run/v.sock"));
  EXPECT_THAT(refused([](auto& o) { o.nets.clear(); }),
              HasSubstr("the snapshot's network device 'eth0' names the host TAP tap1"));
  EXPECT_THAT(refused([](auto& o) { o.nets[0].tap.reset(); }),
              HasSubstr("a snapshot's state file is not trusted to choose host files"));
  // Without the flag, a restore by hand keeps the snapshot's paths.
  RestoreOverrides by_hand;
  ASSERT_OK_AND_ASSIGN(auto kept, apply_overrides(snapshot, by_hand));
  EXPECT_EQ(kept.drives[1].path, "/dev/sda");
  EXPECT_EQ(kept.nets[0].host_cidr, "10.99.0.1/24");
}

TEST(SnapshotConfig, AnOverrideNamesTheSnapshotsInterfaceByItsId) {
  MachineConfig snapshot = full_config();
  RestoreOverrides overrides;
  overrides.nets = {{.iface_id = "eth0", .tap = "tap9"}};  // no id configured: the guest's name
  ASSERT_OK(apply_overrides(snapshot, overrides));
  snapshot.nets[0].id = "net1";
  const auto wrong = apply_overrides(snapshot, overrides);
  ASSERT_FALSE(wrong);
  EXPECT_THAT(wrong.error().message(),
              HasSubstr("no network interface 'eth0': the snapshot's VM has 'net1'"));
  overrides.nets[0].iface_id = "net1";
  ASSERT_OK_AND_ASSIGN(auto clone, apply_overrides(snapshot, overrides));
  EXPECT_EQ(clone.nets[0].tap, "tap9");
}

TEST(SnapshotConfig, TheRootDriveAndTheInterfacesIdSurviveASnapshot) {
  MachineConfig c = full_config();
  c.drives[0].is_root = true;
  c.drives[0].partuuid = "0eaa91a0-01";
  c.nets[0].id = "net1";
  ASSERT_OK_AND_ASSIGN(auto back, snapshot_config_from_json(snapshot_config_to_json(c)));
  EXPECT_EQ(back.drives, c.drives);
  EXPECT_EQ(back.nets, c.nets);
}

// A snapshot's vCPUs keep the CPUID they had; GET /machine-config of its restores says smt.
TEST(SnapshotConfig, SmtSurvivesASnapshotAndAnOlderSnapshotHasNone) {
  MachineConfig c = full_config();
  c.vcpus = 4;
  c.smt = true;
  ASSERT_OK_AND_ASSIGN(auto back, snapshot_config_from_json(snapshot_config_to_json(c)));
  EXPECT_TRUE(back.smt);
  c.smt = false;
  const std::string older = snapshot_config_to_json(c);
  EXPECT_EQ(older.find("smt"), std::string::npos) << "written only when set";
  ASSERT_OK_AND_ASSIGN(auto none, snapshot_config_from_json(older));
  EXPECT_FALSE(none.smt);
}

TEST(SnapshotConfig, RateLimitersSurviveASnapshot) {
  MachineConfig c = full_config();
  c.drives[0].rate_limiter.ops =
      devices::TokenBucketConfig{.size = 100, .one_time_burst = 7, .refill_time_ms = 1000};
  c.nets[0].rx_rate_limiter.bandwidth =
      devices::TokenBucketConfig{.size = 1 << 20, .one_time_burst = 0, .refill_time_ms = 100};
  ASSERT_OK_AND_ASSIGN(auto back, snapshot_config_from_json(snapshot_config_to_json(c)));
  EXPECT_EQ(back.drives, c.drives);
  EXPECT_EQ(back.nets, c.nets);
}

}  // namespace

// Firecracker's several interfaces: each is kept, in order, with its own TAP, MAC, id and
// limits; a snapshot with one is written as before ("net"), so an older dsec-vmm reads it.
TEST(SnapshotConfig, SeveralInterfacesSurviveASnapshotInOrder) {
  MachineConfig c = full_config();
  c.nets[0].id = "wan";
  c.nets.push_back({.tap = "tap2", .host_cidr = "10.1.0.1/24", .mac = "", .id = "lan"});
  c.nets[1].tx_rate_limiter.ops =
      devices::TokenBucketConfig{.size = 10, .one_time_burst = 0, .refill_time_ms = 100};
  const std::string json = snapshot_config_to_json(c);
  EXPECT_NE(json.find("\"nets\""), std::string::npos);
  ASSERT_OK_AND_ASSIGN(auto back, snapshot_config_from_json(json));
  EXPECT_EQ(back.nets, c.nets);
  c.nets.pop_back();
  const std::string one = snapshot_config_to_json(c);
  EXPECT_EQ(one.find("\"nets\""), std::string::npos) << one;
  auto both = nlohmann::json::parse(json);
  both["net"] = nlohmann::json::parse(one)["net"];
  EXPECT_THAT(snapshot_config_from_json(both.dump()).error().message(),
              HasSubstr("both \"net\" and \"nets\""));
}

// Firecracker's network_overrides: each names its interface; the others keep their TAPs.
TEST(SnapshotConfig, EachOverrideReachesTheInterfaceItNames) {
  MachineConfig snapshot = full_config();
  snapshot.nets[0].id = "wan";
  snapshot.nets.push_back({.tap = "tap2", .host_cidr = "", .mac = "", .id = "lan"});
  RestoreOverrides overrides;
  overrides.nets = {{.iface_id = "lan", .tap = "clone-lan"}};
  ASSERT_OK_AND_ASSIGN(auto clone, apply_overrides(snapshot, overrides));
  EXPECT_EQ(clone.nets[0].tap, "tap1");
  EXPECT_EQ(clone.nets[1].tap, "clone-lan");
  overrides.nets.push_back({.iface_id = "wan", .tap = "clone-wan"});
  ASSERT_OK_AND_ASSIGN(clone, apply_overrides(snapshot, overrides));
  EXPECT_EQ(clone.nets[0].tap, "clone-wan");
  EXPECT_EQ(clone.nets[1].tap, "clone-lan");

  auto refused = [&](std::vector<NetOverride> nets, bool refuse_host_paths = false) {
    RestoreOverrides o;
    o.nets = std::move(nets);
    o.refuse_snapshot_host_paths = refuse_host_paths;
    o.drive_paths = {"/a", "/b"};
    o.vsock_uds_path = "/v";
    const auto r = apply_overrides(snapshot, o);
    return r ? std::string("(accepted)") : r.error().message();
  };
  EXPECT_THAT(refused({{.iface_id = "dmz", .tap = "t"}}),
              HasSubstr("no network interface 'dmz': the snapshot's VM has 'wan', 'lan'"));
  EXPECT_THAT(refused({{.iface_id = "lan", .tap = "a"}, {.iface_id = "lan", .tap = "b"}}),
              HasSubstr("two network overrides for interface 'lan'"));
  EXPECT_THAT(refused({{.iface_id = "wan", .tap = "a"}}, true),
              HasSubstr("the snapshot's network device 'lan' names the host TAP tap2"));
  EXPECT_EQ(refused({{.iface_id = "wan", .tap = "a"}, {.iface_id = "lan", .tap = "b"}}, true),
            "(accepted)");
}

}  // namespace dsec::machine

// Firecracker's pre-boot endpoints over a fake backend: a fresh VMM configured request by
// request and started with InstanceStart, and the order rules around it (configuration
// only before the start, a load only on a VMM nothing was configured on, the actions that
// need a VM). A refused request never reaches the backend and changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "tests/support/api_calls.h"
#include "tests/support/fake_vm_backend.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/vm_api.h"

namespace dsec::api {
namespace {

using test::FakeVmBackend;
using test::fault_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kStart = R"({"action_type": "InstanceStart"})";
constexpr const char* kLoad = R"({"snapshot_path": "/s/state", "mem_file_path": "/s/memory"})";

class ApiVmApiPreboot : public ::testing::Test {
 protected:
  ApiVmApiPreboot() {
    std::ofstream(kernel_) << "kernel";
    std::ofstream(rootfs_) << "rootfs";
  }
  http::HttpResponse call(http::Method method, const std::string& path,
                          const std::string& body = "") {
    return test::call(api_, method, path, body);
  }
  http::HttpResponse put(const std::string& path, const std::string& body) {
    return call(http::Method::kPut, path, body);
  }
  std::string boot_source() const {
    return nlohmann::json{{"kernel_image_path", kernel_}, {"boot_args", "console=ttyS0"}}.dump();
  }
  std::string root_drive() const {
    return nlohmann::json{{"drive_id", "rootfs"},
                          {"path_on_host", rootfs_},
                          {"is_root_device", true},
                          {"is_read_only", false}}
        .dump();
  }
  // Every pre-boot request, each valid on a fresh VMM.
  std::vector<std::tuple<http::Method, std::string, std::string>> configuration() const {
    return {{http::Method::kPut, "/boot-source", boot_source()},
            {http::Method::kPut, "/machine-config", R"({"vcpu_count": 2, "mem_size_mib": 256})"},
            {http::Method::kPatch, "/machine-config", R"({"vcpu_count": 1})"},
            {http::Method::kPut, "/drives/rootfs", root_drive()},
            {http::Method::kPut, "/network-interfaces/net1",
             R"({"iface_id": "net1", "host_dev_name": "tap0"})"},
            {http::Method::kPut, "/vsock",
             nlohmann::json{{"guest_cid", 3}, {"uds_path", dir_.file("v.sock")}}.dump()},
            {http::Method::kPut, "/entropy", "{}"},
            {http::Method::kPut, "/logger", R"({"level": "Info"})"}};
  }

  test::TempDir dir_;
  const std::string kernel_ = dir_.file("vmlinux");
  const std::string rootfs_ = dir_.file("rootfs.ext4");
  FakeVmBackend backend_;
  VmApi api_{backend_, "fresh"};
};

TEST_F(ApiVmApiPreboot, AFreshVmmIsConfiguredRequestByRequestThenStarted) {
  ASSERT_EQ(put("/logger", R"({"log_path": "/run/fc.log", "level": "Debug"})").status, 204);
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/drives/rootfs", root_drive()).status, 204);
  ASSERT_EQ(put("/machine-config", R"({"vcpu_count": 2, "mem_size_mib": 1024})").status, 204);
  ASSERT_EQ(
      put("/network-interfaces/net1",
          R"({"iface_id": "net1", "guest_mac": "06:00:AC:10:00:02", "host_dev_name": "tap0"})")
          .status,
      204);
  ASSERT_EQ(
      put("/vsock", nlohmann::json{{"guest_cid", 7}, {"uds_path", dir_.file("v.sock")}}.dump())
          .status,
      204);
  ASSERT_EQ(put("/entropy", "{}").status, 204);
  EXPECT_THAT(backend_.calls, ElementsAre("logger")) << "nothing is built before the start";

  // What is configured so far, in Firecracker's shapes.
  const auto machine = nlohmann::json::parse(call(http::Method::kGet, "/machine-config").body);
  EXPECT_EQ(machine.at("vcpu_count"), 2);
  EXPECT_EQ(machine.at("mem_size_mib"), 1024);
  const auto config = nlohmann::json::parse(call(http::Method::kGet, "/vm/config").body);
  EXPECT_EQ(config.at("boot-source").at("kernel_image_path"), kernel_);
  EXPECT_EQ(config.at("drives")[0].at("drive_id"), "rootfs");
  EXPECT_EQ(config.at("drives")[0].at("is_root_device"), true);
  EXPECT_EQ(config.at("network-interfaces")[0].at("iface_id"), "net1");
  EXPECT_EQ(config.at("vsock").at("guest_cid"), 7);
  EXPECT_TRUE(config.at("entropy").is_object());

  ASSERT_EQ(put("/actions", kStart).status, 204);
  EXPECT_THAT(backend_.calls, ElementsAre("logger", "boot"));
  ASSERT_TRUE(backend_.logger);
  EXPECT_EQ(backend_.logger->log_path, "/run/fc.log");
  ASSERT_TRUE(backend_.booted);
  const machine::MachineConfig& booted = *backend_.booted;
  EXPECT_EQ(booted.kernel_path, kernel_);
  EXPECT_EQ(booted.vcpus, 2u);
  EXPECT_EQ(booted.memory_mib, 1024u);
  ASSERT_EQ(booted.drives.size(), 1u);
  EXPECT_EQ(booted.drives[0].path, rootfs_);
  EXPECT_TRUE(booted.rng);
  // The root drive reaches the guest's command line, before boot_args.
  EXPECT_THAT(machine::guest_cmdline(booted), HasSubstr("root=/dev/vda rw console=ttyS0"));
  EXPECT_EQ(nlohmann::json::parse(call(http::Method::kGet, "/").body).at("state"), "Running");
}

TEST_F(ApiVmApiPreboot, ConfigurationIsRefusedOnceTheVmStartedAndChangesNothing) {
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/actions", kStart).status, 204);
  for (const auto& [method, path, body] : configuration()) {
    const auto r = call(method, path, body);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_THAT(fault_of(r), HasSubstr("is not supported after the VM started")) << path;
  }
  const auto again = put("/actions", kStart);
  EXPECT_EQ(again.status, 400);
  EXPECT_THAT(fault_of(again), HasSubstr("InstanceStart is not supported after the VM started"));
  EXPECT_THAT(backend_.calls, ElementsAre("boot"));
  EXPECT_EQ(
      nlohmann::json::parse(call(http::Method::kGet, "/machine-config").body).at("vcpu_count"), 1);
}

TEST_F(ApiVmApiPreboot, AVmBootedByTheCommandLineTakesNoConfigurationEither) {
  backend_.current = InstanceState::kRunning;  // `run --api-sock`
  const auto r = put("/drives/rootfs", root_drive());
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(fault_of(r), HasSubstr("PUT /drives is not supported after the VM started"));
}

TEST_F(ApiVmApiPreboot, ABadBodyIsRefusedBeforeTheOrderRules) {
  backend_.current = InstanceState::kRunning;
  const auto r = put("/boot-source", R"({"kernel_image_path": 5})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(fault_of(r), HasSubstr("must be a string, not an integer"));
}

TEST_F(ApiVmApiPreboot, InstanceStartNeedsABootSourceAndAFailedStartLeavesTheVmmFresh) {
  const auto bare = put("/actions", kStart);
  EXPECT_EQ(bare.status, 400);
  EXPECT_THAT(fault_of(bare), HasSubstr("cannot start the VM without a kernel"));
  EXPECT_TRUE(backend_.calls.empty());
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  backend_.fail_next = "InstanceStart: KVM_CREATE_VM: Too many open files";
  const auto failed = put("/actions", kStart);
  EXPECT_EQ(failed.status, 400);
  EXPECT_EQ(fault_of(failed), "InstanceStart: KVM_CREATE_VM: Too many open files");
  EXPECT_EQ(nlohmann::json::parse(call(http::Method::kGet, "/").body).at("state"), "Not started");
  ASSERT_EQ(put("/actions", kStart).status, 204);
}

TEST_F(ApiVmApiPreboot, ALoadIsRefusedAfterAnyBootConfigurationButNotAfterTheLogger) {
  ASSERT_EQ(put("/logger", R"({"level": "Warning"})").status, 204);
  ASSERT_EQ(put("/snapshot/load", kLoad).status, 204);
  EXPECT_THAT(backend_.calls, ElementsAre("logger", "load"));
  for (const auto& [method, path, body] : configuration()) {
    if (path == "/logger") {
      continue;
    }
    FakeVmBackend backend;
    VmApi api(backend, "fresh");
    const auto configured = test::call(api, method, path, body);
    ASSERT_EQ(configured.status, 204) << path << ": " << configured.body;
    const auto r = test::call(api, http::Method::kPut, "/snapshot/load", kLoad);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_THAT(fault_of(r),
                HasSubstr("cannot load a snapshot: this VMM was configured for a boot"))
        << path;
    EXPECT_TRUE(backend.calls.empty()) << path;
  }
}

TEST_F(ApiVmApiPreboot, TheActionsThatNeedAVmReachItOrSayWhatIsMissing) {
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/actions", kStart).status, 204);
  EXPECT_EQ(put("/actions", R"({"action_type": "SendCtrlAltDel"})").status, 204);
  EXPECT_EQ(put("/actions", R"({"action_type": "FlushMetrics"})").status, 204);
  EXPECT_THAT(backend_.calls, ElementsAre("boot", "ctrl-alt-del", "flush-metrics"));
}

TEST_F(ApiVmApiPreboot, MetricsAreConfiguredBeforeTheStartAndFlushedAnyTime) {
  EXPECT_EQ(put("/actions", R"({"action_type": "FlushMetrics"})").status, 204);
  ASSERT_EQ(put("/metrics", R"({"metrics_path": "/run/fc.metrics"})").status, 204);
  EXPECT_EQ(backend_.metrics_path, "/run/fc.metrics");
  backend_.fail_next = "cannot open the metrics file /run/fc.metrics";
  const auto refused = put("/actions", R"({"action_type": "FlushMetrics"})");
  EXPECT_EQ(refused.status, 400);
  EXPECT_THAT(fault_of(refused), HasSubstr("cannot open the metrics file"));
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/actions", kStart).status, 204);
  const auto late = put("/metrics", R"({"metrics_path": "/run/other"})");
  EXPECT_EQ(late.status, 400);
  EXPECT_THAT(backend_.calls, ElementsAre("flush-metrics", "metrics", "flush-metrics", "boot"));
}

TEST_F(ApiVmApiPreboot, EntropyTakesARateLimiter) {
  ASSERT_EQ(
      put("/entropy", R"({"rate_limiter": {"ops": {"size": 10, "refill_time": 1000}}})").status,
      204);
  const auto config = nlohmann::json::parse(call(http::Method::kGet, "/vm/config").body);
  EXPECT_EQ(config.at("entropy").at("rate_limiter").at("ops").at("size"), 10);
}

TEST_F(ApiVmApiPreboot, PatchChangesARunningVmsRateLimitersBucketByBucket) {
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  auto limited = nlohmann::json::parse(root_drive());
  limited["rate_limiter"] = {{"bandwidth", {{"size", 1000}, {"refill_time", 10}}},
                             {"ops", {{"size", 5}, {"refill_time", 10}}}};
  ASSERT_EQ(put("/drives/rootfs", limited.dump()).status, 204);
  ASSERT_EQ(put("/network-interfaces/net1", R"({"iface_id": "net1", "host_dev_name": "tap0",
                "rx_rate_limiter": {"ops": {"size": 1, "refill_time": 1}}})")
                .status,
            204);
  ASSERT_EQ(put("/actions", kStart).status, 204);

  // A bucket given replaces the drive's; the other stays.
  EXPECT_EQ(call(http::Method::kPatch, "/drives/rootfs", R"({"drive_id": "rootfs",
                 "rate_limiter": {"bandwidth": {"size": 0, "refill_time": 0}}})")
                .status,
            204);
  const auto& drive = backend_.machine_config.drives.at(0).rate_limiter;
  EXPECT_FALSE(drive.bandwidth->limits());
  EXPECT_EQ(drive.ops,
            (devices::TokenBucketConfig{.size = 5, .one_time_burst = 0, .refill_time_ms = 10}));
  EXPECT_EQ(call(http::Method::kPatch, "/network-interfaces/net1", R"({"iface_id": "net1",
                 "tx_rate_limiter": {"ops": {"size": 2, "refill_time": 3}}})")
                .status,
            204);
  EXPECT_TRUE(backend_.machine_config.nets[0].rx_rate_limiter.limits());
  EXPECT_EQ(backend_.machine_config.nets[0].tx_rate_limiter.ops,
            (devices::TokenBucketConfig{.size = 2, .one_time_burst = 0, .refill_time_ms = 3}));
  // GET /vm/config shows the VM's limiters as they are now.
  const auto config = nlohmann::json::parse(call(http::Method::kGet, "/vm/config").body);
  EXPECT_EQ(config.at("drives")[0].at("rate_limiter").at("bandwidth").at("size"), 0);
  EXPECT_EQ(config.at("network-interfaces")[0].at("tx_rate_limiter").at("ops").at("size"), 2);
  EXPECT_THAT(backend_.calls, ElementsAre("boot", "drive-rate-limiter", "net-rate-limiters"));
}

// firecracker-go-sdk's UpdateGuestDrive, and Kata's drives after its placeholders: a
// running VM's drive gets another file, then its rate limiter, as in Firecracker.
TEST_F(ApiVmApiPreboot, PatchGivesARunningVmsDriveAnotherFileAndARefusalChangesNothing) {
  const auto early = call(http::Method::kPatch, "/drives/rootfs",
                          R"({"drive_id": "rootfs", "path_on_host": "/d/new.img"})");
  EXPECT_EQ(early.status, 400);
  EXPECT_THAT(fault_of(early), HasSubstr("there is no VM yet"));
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/drives/rootfs", root_drive()).status, 204);
  ASSERT_EQ(put("/actions", kStart).status, 204);

  backend_.fail_next = "cannot open disk /d/missing.img for reading and writing";
  const auto missing = call(http::Method::kPatch, "/drives/rootfs", R"({"drive_id": "rootfs",
      "path_on_host": "/d/missing.img", "rate_limiter": {"ops": {"size": 1, "refill_time": 1}}})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_THAT(fault_of(missing), HasSubstr("cannot open disk /d/missing.img"));
  EXPECT_FALSE(backend_.machine_config.drives.at(0).rate_limiter.limits())
      << "the rate limiter did not change either";

  EXPECT_EQ(call(http::Method::kPatch, "/drives/rootfs", R"({"drive_id": "rootfs",
                 "path_on_host": "/d/new.img"})")
                .status,
            204);
  const auto config = nlohmann::json::parse(call(http::Method::kGet, "/vm/config").body);
  EXPECT_EQ(config.at("drives")[0].at("path_on_host"), "/d/new.img");
  EXPECT_THAT(backend_.calls,
              ElementsAre("boot", "drive-file", "drive-file", "drive-rate-limiter"));
}

TEST_F(ApiVmApiPreboot, PatchRefusesWhatItCannotChangeAndDevicesTheVmLacks) {
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/drives/rootfs", root_drive()).status, 204);
  ASSERT_EQ(put("/actions", kStart).status, 204);
  const auto refused = [&](const std::string& path, const std::string& body) {
    const auto r = call(http::Method::kPatch, path, body);
    EXPECT_EQ(r.status, 400) << body;
    return fault_of(r);
  };
  EXPECT_THAT(refused("/drives/rootfs", R"({"drive_id": "rootfs", "path_on_host": ""})"),
              HasSubstr("'path_on_host' in the body must not be empty"));
  EXPECT_THAT(refused("/drives/scratch", R"({"drive_id": "scratch"})"),
              HasSubstr("the VM has no drive 'scratch'"));
  EXPECT_THAT(refused("/drives/rootfs", R"({"drive_id": "rootfs",
                      "rate_limiter": {"ops": {"size": -1, "refill_time": 1}}})"),
              HasSubstr("'size' in rate_limiter.ops must be a non-negative integer"));
  EXPECT_THAT(refused("/network-interfaces/net1", R"({"iface_id": "net1"})"),
              HasSubstr("the VM has no network interface 'net1'"));
  EXPECT_THAT(refused("/network-interfaces/net1", R"({"iface_id": "net1", "mtu": 1})"),
              HasSubstr("unknown field 'mtu'"));
  EXPECT_THAT(backend_.calls, ElementsAre("boot"));
}

TEST_F(ApiVmApiPreboot, SeveralNetworkInterfacesEachPatchedByItsId) {
  ASSERT_EQ(put("/boot-source", boot_source()).status, 204);
  ASSERT_EQ(put("/network-interfaces/net1", R"({"iface_id": "net1", "host_dev_name": "t0"})")
                .status,
            204);
  ASSERT_EQ(put("/network-interfaces/net2", R"({"iface_id": "net2", "host_dev_name": "t1",
                "guest_mac": "06:00:00:00:00:02"})")
                .status,
            204);
  const auto same_tap =
      put("/network-interfaces/net3", R"({"iface_id": "net3", "host_dev_name": "t1"})");
  EXPECT_EQ(same_tap.status, 400);
  EXPECT_THAT(fault_of(same_tap), HasSubstr("'net2' and 'net3' have the same TAP t1"));
  ASSERT_EQ(put("/actions", kStart).status, 204);
  ASSERT_EQ(backend_.machine_config.nets.size(), 2u);
  EXPECT_EQ(call(http::Method::kPatch, "/network-interfaces/net2",
                 R"({"iface_id": "net2", "tx_rate_limiter": {"ops": {"size": 2, "refill_time": 3}}})")
                .status,
            204);
  EXPECT_FALSE(backend_.machine_config.nets[0].tx_rate_limiter.limits());
  EXPECT_TRUE(backend_.machine_config.nets[1].tx_rate_limiter.limits());
  const auto config = nlohmann::json::parse(call(http::Method::kGet, "/vm/config").body);
  const auto& nets = config.at("network-interfaces");
  ASSERT_EQ(nets.size(), 2u);
  EXPECT_EQ(nets[0].at("iface_id"), "net1");
  EXPECT_EQ(nets[0].at("guest_mac"), "52:54:00:12:34:56");
  EXPECT_EQ(nets[1].at("iface_id"), "net2");
  EXPECT_EQ(nets[1].at("host_dev_name"), "t1");
  EXPECT_EQ(nets[1].at("guest_mac"), "06:00:00:00:00:02");
  EXPECT_EQ(nets[1].at("tx_rate_limiter").at("ops").at("size"), 2);
}

TEST_F(ApiVmApiPreboot, WhatThisVmmCannotDoIsRefusedNotIgnored) {
  // The path's id and the body's must agree.
  const auto mismatch = put("/drives/other", root_drive());
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_THAT(fault_of(mismatch), HasSubstr("does not match \"other\" in the path"));
  EXPECT_TRUE(backend_.calls.empty());
}

// Firecracker reads an optional field given as null as one left out: a PATCH's fields too.
TEST_F(ApiVmApiPreboot, AnOptionalFieldGivenAsNullIsOneLeftOut) {
  EXPECT_EQ(call(http::Method::kPatch, "/machine-config",
                 R"({"vcpu_count": null, "mem_size_mib": 512, "smt": null, "cpu_template": null,
                     "track_dirty_pages": null, "huge_pages": null})")
                .status,
            204);
  const auto config = nlohmann::json::parse(call(http::Method::kGet, "/machine-config").body);
  EXPECT_EQ(config.at("vcpu_count"), 1);
  EXPECT_EQ(config.at("mem_size_mib"), 512);
  const auto nothing = call(http::Method::kPatch, "/machine-config", R"({"vcpu_count": null})");
  EXPECT_EQ(nothing.status, 400);
  EXPECT_THAT(fault_of(nothing), HasSubstr("the body changes nothing"));
  const auto required = put("/machine-config", R"({"vcpu_count": 1, "mem_size_mib": null})");
  EXPECT_EQ(required.status, 400) << "a required field is never null";
  EXPECT_EQ(put("/network-interfaces/n", R"({"iface_id": "n", "host_dev_name": "t", "guest_mac": null,
                "rx_rate_limiter": null, "tx_rate_limiter": {"bandwidth": null, "ops": null},
                "mtu": null})")
                .status,
            204);
  EXPECT_EQ(put("/drives/d", nlohmann::json{{"drive_id", "d"},
                                            {"path_on_host", rootfs_},
                                            {"is_root_device", false},
                                            {"is_read_only", nullptr},
                                            {"partuuid", nullptr},
                                            {"cache_type", nullptr},
                                            {"io_engine", nullptr},
                                            {"rate_limiter", nullptr},
                                            {"socket", nullptr}}
                                 .dump())
                .status,
            204);
}

// Firecracker's deprecated fields: the answer, a success or a refusal, has its
// `Deprecation: true` header; the same request without them has none.
TEST_F(ApiVmApiPreboot, ABodyWithAFieldFirecrackerDeprecatedIsAnsweredWithDeprecation) {
  const auto deprecated = [](const http::HttpResponse& r) {
    return std::ranges::count(r.headers, std::pair<std::string, std::string>{"Deprecation", "true"});
  };
  const std::string vsock = dir_.file("v.sock");
  EXPECT_EQ(deprecated(put("/vsock", nlohmann::json{{"guest_cid", 3}, {"uds_path", vsock}}.dump())),
            0);
  const auto with_id =
      put("/vsock", nlohmann::json{{"guest_cid", 3}, {"uds_path", vsock}, {"vsock_id", "v"}}.dump());
  EXPECT_EQ(with_id.status, 204);
  EXPECT_EQ(deprecated(with_id), 1);
  EXPECT_EQ(deprecated(put("/vsock", nlohmann::json{{"guest_cid", 3},
                                                    {"uds_path", vsock},
                                                    {"vsock_id", nullptr}}
                                         .dump())),
            0)
      << "null is an absent field";
  EXPECT_EQ(deprecated(put("/machine-config",
                           R"({"vcpu_count": 1, "mem_size_mib": 128, "cpu_template": "None"})")),
            1);
  EXPECT_EQ(deprecated(call(http::Method::kPatch, "/machine-config", R"({"cpu_template": "None"})")),
            1);
  const auto refused = put("/machine-config", R"({"vcpu_count": 0, "cpu_template": "None"})");
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(deprecated(refused), 1);
  EXPECT_EQ(deprecated(put("/machine-config", R"({"vcpu_count": 1, "mem_size_mib": 128})")), 0);

  FakeVmBackend fresh_backend;
  VmApi fresh(fresh_backend, "fresh");
  const auto load = test::call(fresh, http::Method::kPut, "/snapshot/load", kLoad);
  EXPECT_EQ(load.status, 204);
  EXPECT_EQ(deprecated(load), 1) << "mem_file_path";
  FakeVmBackend other_backend;
  VmApi other(other_backend, "other");
  EXPECT_EQ(deprecated(test::call(other, http::Method::kPut, "/snapshot/load",
                                  R"({"snapshot_path": "/s/state", "mem_backend":
                                      {"backend_type": "File", "backend_path": "/s/memory"}})")),
            0);
}

TEST_F(ApiVmApiPreboot, VersionIsFirecrackersShape) {
  const auto r = call(http::Method::kGet, "/version");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(r.body).at("firecracker_version"), kVmmVersion);
}

}  // namespace
}  // namespace dsec::api

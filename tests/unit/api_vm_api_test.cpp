// The VM's endpoints over a fake backend: what each answers, and the order rules (load
// only on a fresh VMM, create only while paused, pause and resume only with a VM). A
// refused request never reaches the backend.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/api_calls.h"
#include "tests/support/fake_vm_backend.h"
#include "vmm/api/vm_api.h"
#include "vmm/api/vm_config_json.h"

namespace dsec::api {
namespace {

using test::FakeVmBackend;
using test::fault_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kCreate =
    R"({"snapshot_type": "Full", "snapshot_path": "/s/state", "mem_file_path": "/s/memory"})";
constexpr const char* kLoad =
    R"({"snapshot_path": "/s/state", "mem_backend": {"backend_type": "File",
        "backend_path": "/s/memory"}, "resume_vm": true})";

class ApiVmApi : public ::testing::Test {
 protected:
  http::HttpResponse call(http::Method method, const std::string& path,
                          const std::string& body = "") {
    return test::call(api_, method, path, body);
  }
  std::string state() {
    return nlohmann::json::parse(call(http::Method::kGet, "/").body).at("state").get<std::string>();
  }
  void boot() { backend_.current = InstanceState::kRunning; }

  FakeVmBackend backend_;
  VmApi api_{backend_, "sandbox-7"};
};

TEST_F(ApiVmApi, InstanceInfoSaysWhoAndInWhatState) {
  const auto r = call(http::Method::kGet, "/");
  EXPECT_EQ(r.status, 200);
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j.at("id"), "sandbox-7");
  EXPECT_EQ(j.at("state"), "Not started");
  EXPECT_EQ(j.at("app_name"), "dsec-vmm");
  EXPECT_EQ(j.at("vmm_version"), kVmmVersion);
  EXPECT_FALSE(std::string(kVmmVersion).empty());
  boot();
  EXPECT_EQ(state(), "Running");
  backend_.current = InstanceState::kPaused;
  EXPECT_EQ(state(), "Paused");
}

TEST_F(ApiVmApi, PauseResumeAndCreateAWhilePausedReachTheBackend) {
  boot();
  EXPECT_EQ(call(http::Method::kPatch, "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(state(), "Paused");
  EXPECT_EQ(call(http::Method::kPut, "/snapshot/create", kCreate).status, 204);
  ASSERT_TRUE(backend_.created);
  EXPECT_EQ(*backend_.created, (SnapshotCreateRequest{"/s/state", "/s/memory"}));
  EXPECT_EQ(call(http::Method::kPatch, "/vm", R"({"state": "Resumed"})").status, 204);
  EXPECT_EQ(state(), "Running");
  EXPECT_THAT(backend_.calls, ElementsAre("pause", "create", "resume"));
}

TEST_F(ApiVmApi, CreateWhileRunningIsRefused) {
  boot();
  const auto r = call(http::Method::kPut, "/snapshot/create", kCreate);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(fault_of(r), HasSubstr("cannot create a snapshot while running: pause the VM first"));
  EXPECT_TRUE(backend_.calls.empty());
  EXPECT_EQ(state(), "Running");
}

TEST_F(ApiVmApi, NothingThatNeedsAVmWorksWithoutOne) {
  for (const auto& [method, path, body] :
       std::vector<std::tuple<http::Method, std::string, std::string>>{
           {http::Method::kPatch, "/vm", R"({"state": "Paused"})"},
           {http::Method::kPatch, "/vm", R"({"state": "Resumed"})"},
           {http::Method::kPut, "/snapshot/create", kCreate},
           {http::Method::kPut, "/actions", R"({"action_type": "SendCtrlAltDel"})"},
           {http::Method::kPatch, "/drives/rootfs", R"({"drive_id": "rootfs"})"},
           {http::Method::kPatch, "/network-interfaces/net1", R"({"iface_id": "net1"})"}}) {
    const auto r = call(method, path, body);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_THAT(fault_of(r), HasSubstr("there is no VM yet: start one (PUT /actions")) << path;
  }
  EXPECT_TRUE(backend_.calls.empty());
}

TEST_F(ApiVmApi, LoadOnAFreshVmmReachesTheBackendOnce) {
  EXPECT_EQ(call(http::Method::kPut, "/snapshot/load", kLoad).status, 204);
  ASSERT_TRUE(backend_.loaded);
  EXPECT_EQ(backend_.loaded->snapshot_path, "/s/state");
  EXPECT_EQ(backend_.loaded->mem_file_path, "/s/memory");
  EXPECT_EQ(state(), "Running");
  const auto again = call(http::Method::kPut, "/snapshot/load", kLoad);
  EXPECT_EQ(again.status, 400);
  EXPECT_THAT(fault_of(again), HasSubstr("already has a VM"));
  EXPECT_THAT(backend_.calls, ElementsAre("load"));
}

TEST_F(ApiVmApi, LoadAfterABootIsRefused) {
  boot();
  const auto r = call(http::Method::kPut, "/snapshot/load", kLoad);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(fault_of(r), HasSubstr("cannot load a snapshot: this VMM already has a VM"));
  EXPECT_TRUE(backend_.calls.empty());
  EXPECT_EQ(state(), "Running");
}

TEST_F(ApiVmApi, AFailedLoadLeavesTheVmmFreshForAnother) {
  backend_.fail_next = "snapshot load: cannot open /s/state";
  const auto r = call(http::Method::kPut, "/snapshot/load", kLoad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(fault_of(r), "snapshot load: cannot open /s/state");
  EXPECT_EQ(state(), "Not started");
  EXPECT_EQ(call(http::Method::kPut, "/snapshot/load", kLoad).status, 204);
}

TEST_F(ApiVmApi, ABackendErrorIs400WithItsMessage) {
  boot();
  backend_.fail_next = "the VM has ended";
  const auto r = call(http::Method::kPatch, "/vm", R"({"state": "Paused"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(fault_of(r), "the VM has ended");
}

TEST_F(ApiVmApi, ABadBodyIsRefusedBeforeTheOrderRulesAndTheBackend) {
  boot();
  const auto r = call(http::Method::kPatch, "/vm", R"({"state": "Stopped"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(fault_of(r), HasSubstr("not \"Stopped\""));
  EXPECT_EQ(call(http::Method::kPut, "/snapshot/create", "{}").status, 400);
  EXPECT_EQ(call(http::Method::kPut, "/snapshot/load", "{}").status, 400);
  EXPECT_TRUE(backend_.calls.empty());
}

// Firecracker answers an unknown path and a method its path does not take alike: 400,
// "Invalid request method and/or path", with no Allow header.
TEST_F(ApiVmApi, UnknownPathsAndMethodsAre400AsInFirecracker) {
  const std::vector<std::pair<http::Method, std::string>> refused = {
      {http::Method::kGet, "/balloon"},
      {http::Method::kGet, "/drives"},  // no list, only /drives/{id}
      {http::Method::kGet, "/snapshot/create"},
      {http::Method::kPut, "/vm"},
      {http::Method::kDelete, "/"},
      {http::Method::kGet, "/vm/"}};
  for (const auto& [method, path] : refused) {
    const auto r = call(method, path, method == http::Method::kGet ? "" : "{}");
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_EQ(fault_of(r), fmt::format("Invalid request method and/or path: {} {}.",
                                       http::method_name(method), path));
    EXPECT_TRUE(r.headers.empty()) << path << ": no Allow";
  }
  EXPECT_TRUE(backend_.calls.empty());
}

TEST_F(ApiVmApi, VmConfigIsTheMachinesConfiguration) {
  boot();
  auto& c = backend_.machine_config;
  c.vcpus = 2;
  c.memory_mib = 256;
  c.kernel_path = "/k/vmlinux";
  c.initrd_path = "/k/initrd";
  c.cmdline = "console=ttyS0";
  c.drives = {{.path = "/d/root.img", .read_only = true, .id = ""},
              {.path = "/d/scratch.img", .read_only = false, .id = "scratch"}};
  c.vsock = machine::VsockConfig{.guest_cid = 7, .uds_path = "/run/v.sock"};
  c.nets = {machine::NetConfig{.tap = "tap3", .host_cidr = "", .mac = ""}};
  c.rng = true;
  const auto r = call(http::Method::kGet, "/vm/config");
  ASSERT_EQ(r.status, 200);
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j.at("machine-config").at("vcpu_count"), 2);
  EXPECT_EQ(j.at("machine-config").at("mem_size_mib"), 256);
  EXPECT_EQ(j.at("boot-source").at("kernel_image_path"), "/k/vmlinux");
  EXPECT_EQ(j.at("boot-source").at("initrd_path"), "/k/initrd");
  EXPECT_EQ(j.at("boot-source").at("boot_args"), "console=ttyS0");
  ASSERT_EQ(j.at("drives").size(), 2u);
  EXPECT_EQ(j.at("drives")[0].at("drive_id"), "vda");
  EXPECT_EQ(j.at("drives")[0].at("path_on_host"), "/d/root.img");
  EXPECT_EQ(j.at("drives")[0].at("is_read_only"), true);
  EXPECT_EQ(j.at("drives")[1].at("drive_id"), "scratch");
  EXPECT_EQ(j.at("network-interfaces")[0].at("iface_id"), "eth0");
  EXPECT_EQ(j.at("network-interfaces")[0].at("host_dev_name"), "tap3");
  EXPECT_EQ(j.at("network-interfaces")[0].at("guest_mac"), machine::NetConfig::kDefaultGuestMac);
  EXPECT_EQ(j.at("vsock").at("guest_cid"), 7);
  EXPECT_EQ(j.at("vsock").at("uds_path"), "/run/v.sock");
  EXPECT_TRUE(j.at("entropy").is_object());
}

TEST(ApiVmConfigJson, ARestoredVmHasNoBootSourceAndAbsentDevicesAreNullOrEmpty) {
  machine::MachineConfig c;  // as a snapshot's: no kernel
  const auto j = vm_config_json(c);
  EXPECT_TRUE(j.at("boot-source").is_null());
  EXPECT_TRUE(j.at("drives").empty());
  EXPECT_TRUE(j.at("network-interfaces").empty());
  EXPECT_TRUE(j.at("vsock").is_null());
  EXPECT_TRUE(j.at("entropy").is_null());
}

TEST(ApiVmConfigJson, RateLimitersShowInFirecrackersShapeAndNullWithoutOne) {
  machine::MachineConfig c;
  c.drives = {{.path = "/d/a.img", .read_only = false, .id = "a"},
              {.path = "/d/b.img", .read_only = false, .id = "b"}};
  c.drives[0].rate_limiter.bandwidth =
      devices::TokenBucketConfig{.size = 4096, .one_time_burst = 512, .refill_time_ms = 100};
  c.nets = {machine::NetConfig{.tap = "tap3", .host_cidr = "", .mac = ""}};
  c.nets[0].tx_rate_limiter.ops =
      devices::TokenBucketConfig{.size = 10, .one_time_burst = 0, .refill_time_ms = 1000};
  const auto j = vm_config_json(c);
  EXPECT_EQ(j.at("drives")[0].at("rate_limiter"),
            nlohmann::json::parse(
                R"({"bandwidth": {"size": 4096, "one_time_burst": 512, "refill_time": 100}})"));
  EXPECT_TRUE(j.at("drives")[1].at("rate_limiter").is_null());
  EXPECT_TRUE(j.at("network-interfaces")[0].at("rx_rate_limiter").is_null());
  EXPECT_EQ(
      j.at("network-interfaces")[0].at("tx_rate_limiter"),
      nlohmann::json::parse(R"({"ops": {"size": 10, "one_time_burst": 0, "refill_time": 1000}})"));
}

}  // namespace
}  // namespace dsec::api

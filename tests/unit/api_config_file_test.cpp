// Firecracker's --config-file: the document its getting-started guide shows becomes the
// same VM a sequence of API requests makes, and a bad file is refused naming its section
// and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/config_file.h"

namespace dsec::api {
namespace {

using test::error_of;
using ::testing::EndsWith;
using ::testing::HasSubstr;

class ApiConfigFile : public ::testing::Test {
 protected:
  ApiConfigFile() {
    std::ofstream(kernel_) << "kernel";
    std::ofstream(rootfs_) << "rootfs";
  }
  // Firecracker's example configuration, with this test's files.
  nlohmann::json example() const {
    return {
        {"boot-source",
         {{"kernel_image_path", kernel_},
          {"boot_args", "console=ttyS0 reboot=k panic=1 pci=off"},
          {"initrd_path", nullptr}}},
        {"drives",
         {{{"drive_id", "rootfs"},
           {"partuuid", nullptr},
           {"is_root_device", true},
           {"cache_type", "Unsafe"},
           {"is_read_only", false},
           {"path_on_host", rootfs_},
           {"io_engine", "Sync"},
           {"rate_limiter", nullptr},
           {"socket", nullptr}}}},
        {"machine-config",
         {{"vcpu_count", 2},
          {"mem_size_mib", 1024},
          {"smt", false},
          {"track_dirty_pages", false},
          {"huge_pages", "None"}}},
        {"cpu-config", nullptr},
        {"balloon", nullptr},
        {"network-interfaces",
         {{{"iface_id", "net1"}, {"guest_mac", "06:00:AC:10:00:02"}, {"host_dev_name", "tap0"}}}},
        {"vsock", nullptr},
        {"logger", nullptr},
        {"metrics", nullptr},
        {"mmds-config", nullptr},
        {"entropy", nullptr}};
  }

  test::TempDir dir_;
  const std::string kernel_ = dir_.file("vmlinux");
  const std::string rootfs_ = dir_.file("rootfs.ext4");
};

TEST_F(ApiConfigFile, FirecrackersExampleBecomesTheVmItDescribes) {
  ASSERT_OK_AND_ASSIGN(auto file, parse_config_file(example().dump()));
  ASSERT_OK_AND_ASSIGN(auto config, file.preboot.boot_config());
  EXPECT_EQ(config.kernel_path, kernel_);
  EXPECT_EQ(config.initrd_path, "");
  EXPECT_EQ(config.vcpus, 2u);
  EXPECT_EQ(config.memory_mib, 1024u);
  ASSERT_EQ(config.drives.size(), 1u);
  EXPECT_TRUE(config.drives[0].is_root);
  EXPECT_EQ(config.drives[0].id, "rootfs");
  ASSERT_EQ(config.nets.size(), 1u);
  EXPECT_EQ(config.nets[0].iface_id(), "net1");
  EXPECT_EQ(config.nets[0].mac, "06:00:AC:10:00:02");
  EXPECT_FALSE(config.vsock);
  EXPECT_FALSE(config.rng);
  EXPECT_FALSE(file.logger);
  EXPECT_THAT(machine::guest_cmdline(config),
              EndsWith(" root=/dev/vda rw console=ttyS0 reboot=k panic=1 pci=off"));
}

TEST_F(ApiConfigFile, TheSameRequestsThroughTheApiMakeTheSameVm) {
  auto j = example();
  j["vsock"] = {{"guest_cid", 3}, {"uds_path", dir_.file("v.sock")}};
  j["entropy"] = {{"rate_limiter", {{"ops", {{"size", 10}, {"refill_time", 1000}}}}}};
  j["logger"] = {{"log_path", dir_.file("fc.log")}, {"level", "Info"}};
  j["metrics"] = {{"metrics_path", dir_.file("fc.metrics")}};
  ASSERT_OK_AND_ASSIGN(auto file, parse_config_file(j.dump()));
  EXPECT_EQ(file.metrics_path, dir_.file("fc.metrics"));
  PrebootConfig requests;
  ASSERT_OK(requests.set_boot_source(
      {kernel_, "", std::string("console=ttyS0 reboot=k panic=1 pci=off")}));
  ASSERT_OK(requests.put_drive({"rootfs", rootfs_, true, false, ""}));
  ASSERT_OK(requests.update_machine_config({2, 1024, false}));
  ASSERT_OK(requests.put_network_interface({"net1", "tap0", "06:00:AC:10:00:02"}));
  ASSERT_OK(requests.set_vsock({3, dir_.file("v.sock")}));
  requests.set_entropy(
      {.rate_limiter = {.bandwidth = std::nullopt,
                        .ops = devices::TokenBucketConfig{
                            .size = 10, .one_time_burst = 0, .refill_time_ms = 1000}}});
  ASSERT_OK_AND_ASSIGN(auto from_file, file.preboot.boot_config());
  ASSERT_OK_AND_ASSIGN(auto from_requests, requests.boot_config());
  EXPECT_EQ(from_file.kernel_path, from_requests.kernel_path);
  EXPECT_EQ(from_file.cmdline, from_requests.cmdline);
  EXPECT_EQ(from_file.drives, from_requests.drives);
  EXPECT_EQ(from_file.nets, from_requests.nets);
  EXPECT_EQ(from_file.vsock, from_requests.vsock);
  EXPECT_EQ(from_file.rng, from_requests.rng);
  EXPECT_EQ(from_file.rng_rate_limiter, from_requests.rng_rate_limiter);
  EXPECT_EQ(from_file.vcpus, from_requests.vcpus);
  EXPECT_EQ(from_file.memory_mib, from_requests.memory_mib);
  ASSERT_TRUE(file.logger);
  EXPECT_EQ(file.logger->log_path, dir_.file("fc.log"));
}

// Firecracker's list of interfaces: each one the guest's next ethN, in the file's order;
// two on one TAP fail the file as the API refuses them.
TEST_F(ApiConfigFile, EachEntryOfNetworkInterfacesIsAnInterfaceInItsOrder) {
  auto j = example();
  j["network-interfaces"].push_back({{"iface_id", "lan"}, {"host_dev_name", "tap1"}});
  ASSERT_OK_AND_ASSIGN(auto file, parse_config_file(j.dump()));
  ASSERT_OK_AND_ASSIGN(auto config, file.preboot.boot_config());
  ASSERT_EQ(config.nets.size(), 2u);
  EXPECT_EQ(config.nets[0].iface_id(), "net1");
  EXPECT_EQ(config.nets[1].iface_id(), "lan");
  EXPECT_EQ(config.nets[1].tap, "tap1");
  j["network-interfaces"][1]["host_dev_name"] = j["network-interfaces"][0]["host_dev_name"];
  const auto clash = parse_config_file(j.dump());
  ASSERT_FALSE(clash);
  EXPECT_THAT(clash.error().message(), HasSubstr("'net1' and 'lan' have the same TAP"));
}

TEST_F(ApiConfigFile, RateLimitersReachTheDrivesAndTheInterface) {
  auto j = example();
  j["drives"][0]["rate_limiter"] = {{"bandwidth", {{"size", 1 << 20}, {"refill_time", 1000}}}};
  j["network-interfaces"][0]["tx_rate_limiter"] = {
      {"ops", {{"size", 100}, {"one_time_burst", 50}, {"refill_time", 10}}}};
  ASSERT_OK_AND_ASSIGN(auto file, parse_config_file(j.dump()));
  ASSERT_OK_AND_ASSIGN(auto config, file.preboot.boot_config());
  ASSERT_EQ(config.drives.size(), 1u);
  EXPECT_EQ(
      config.drives[0].rate_limiter.bandwidth,
      (devices::TokenBucketConfig{.size = 1 << 20, .one_time_burst = 0, .refill_time_ms = 1000}));
  ASSERT_EQ(config.nets.size(), 1u);
  EXPECT_EQ(config.nets[0].tx_rate_limiter.ops,
            (devices::TokenBucketConfig{.size = 100, .one_time_burst = 50, .refill_time_ms = 10}));
  EXPECT_FALSE(config.nets[0].rx_rate_limiter.limits());
}

// "mmds-config" names interfaces of the file's "network-interfaces".
TEST_F(ApiConfigFile, MmdsConfigEnablesTheMetadataServiceOnItsInterfaces) {
  auto j = example();
  j["mmds-config"] = {{"version", "V2"},
                      {"network_interfaces", {"net1"}},
                      {"ipv4_address", "169.254.170.2"}};
  ASSERT_OK_AND_ASSIGN(auto file, parse_config_file(j.dump()));
  ASSERT_OK_AND_ASSIGN(auto config, file.preboot.boot_config());
  ASSERT_TRUE(config.mmds.has_value());
  EXPECT_EQ(config.mmds->version, mmds::MmdsVersion::kV2);
  EXPECT_EQ(config.mmds->network_interfaces, std::vector<std::string>{"net1"});
  EXPECT_EQ(config.mmds->ipv4_address, (mmds::Ipv4Address{169, 254, 170, 2}));
  EXPECT_FALSE(config.mmds->imds_compat);
  j["mmds-config"]["network_interfaces"] = {"eth7"};
  EXPECT_THAT(error_of(parse_config_file(j.dump())),
              HasSubstr("does not correspond to any existing network interface"));
  j["mmds-config"] = {{"network_interfaces", {"net1"}}, {"frob", 1}};
  EXPECT_THAT(error_of(parse_config_file(j.dump())), HasSubstr("frob"));
}

TEST_F(ApiConfigFile, ABadFileIsRefusedNamingItsSectionAndField) {
  auto with = [this](auto change) {
    auto j = example();
    change(j);
    return error_of(parse_config_file(j.dump()));
  };
  EXPECT_THAT(error_of(parse_config_file("{")), HasSubstr("the configuration is not valid JSON"));
  EXPECT_THAT(error_of(parse_config_file("[]")), HasSubstr("must be a JSON object"));
  EXPECT_THAT(with([](auto& j) {
                j["balloon"] = {{"amount_mib", 1}};
              }),
              HasSubstr("'balloon' in the configuration is not supported"));
  EXPECT_THAT(with([](auto& j) { j["frobnicate"] = true; }),
              HasSubstr("unknown field 'frobnicate' in the configuration"));
  EXPECT_THAT(with([](auto& j) { j["boot-source"].erase("kernel_image_path"); }),
              HasSubstr("'kernel_image_path' is missing in \"boot-source\""));
  EXPECT_THAT(with([](auto& j) { j["machine-config"].erase("vcpu_count"); }),
              HasSubstr("'vcpu_count' is missing in \"machine-config\""));
  EXPECT_THAT(with([](auto& j) { j["drives"][0]["is_root_device"] = 1; }),
              HasSubstr("'is_root_device' in drives[0] must be a boolean, not an integer"));
  EXPECT_THAT(with([](auto& j) { j["drives"][0]["path_on_host"] = "/nonexistent/disk"; }),
              HasSubstr("drive 'rootfs': drive /nonexistent/disk"));
  EXPECT_THAT(with([](auto& j) {
                j["drives"].push_back({{"drive_id", "second"},
                                       {"path_on_host", j["drives"][0]["path_on_host"]},
                                       {"is_root_device", true}});
              }),
              HasSubstr("two root drives"));
  EXPECT_THAT(with([](auto& j) { j["drives"] = nlohmann::json::array({1}); }),
              HasSubstr("drives[0] must be a JSON object"));
  EXPECT_THAT(with([](auto& j) {
                j["network-interfaces"][0]["rx_rate_limiter"] = {{"ops", {{"size", -1}}}};
              }),
              HasSubstr("'size' in rx_rate_limiter.ops must be a non-negative integer"));
  EXPECT_THAT(with([](auto& j) {
                j["metrics"] = {{"path", "/run/m"}};
              }),
              HasSubstr("metrics_path"));
  EXPECT_THAT(with([](auto& j) { j["boot-source"]["kernel_image_path"] = "/nonexistent/k"; }),
              HasSubstr("kernel_image_path /nonexistent/k"));
  // A file without a boot source parses, but has nothing to boot.
  ASSERT_OK_AND_ASSIGN(auto no_kernel, parse_config_file(R"({"machine-config":
      {"vcpu_count": 1, "mem_size_mib": 128}})"));
  EXPECT_FALSE(no_kernel.preboot.boot_config());
}

TEST_F(ApiConfigFile, ReadingAFileNamesIt) {
  const auto missing = read_config_file(dir_.file("none.json"));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr(dir_.file("none.json")));
  const std::string path = dir_.file("vm.json");
  std::ofstream(path) << R"({"boot-source": {}})";
  const auto bad = read_config_file(path);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(),
              HasSubstr("--config-file " + path + ": 'kernel_image_path' is missing"));
}

}  // namespace
}  // namespace dsec::api

// The bodies of Firecracker's pre-boot requests: what a valid body becomes, and every way
// a body is refused (malformed, missing field, unknown field, wrong type, an id that does
// not match the path, a value this VMM cannot honour), each with a message naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "vmm/api/preboot_requests.h"

namespace dsec::api {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// Each parser, from body text as the API gets it.
Result<BootSourceRequest> boot_source(std::string_view text) {
  return parse_boot_source(DSEC_TRY(parse_body(text)));
}
Result<MachineConfigUpdate> machine_config(std::string_view text, Update update) {
  return parse_machine_config(DSEC_TRY(parse_body(text)), update);
}
Result<DriveRequest> drive(std::string_view text, PathId id = "rootfs") {
  return parse_drive(DSEC_TRY(parse_body(text)), id);
}
Result<NetworkInterfaceRequest> net(std::string_view text, PathId id = "net1") {
  return parse_network_interface(DSEC_TRY(parse_body(text)), id);
}
Result<VsockRequest> vsock(std::string_view text) {
  return parse_vsock(DSEC_TRY(parse_body(text)));
}
Result<LoggerRequest> logger(std::string_view text) {
  return parse_logger(DSEC_TRY(parse_body(text)));
}
Result<Action> action(std::string_view text) {
  return parse_action(DSEC_TRY(parse_body(text)));
}
Result<EntropyRequest> entropy(std::string_view text) {
  return parse_entropy(DSEC_TRY(parse_body(text)));
}

TEST(ApiPrebootRequests, BootSourceTakesFirecrackersFields) {
  ASSERT_OK_AND_ASSIGN(auto full, boot_source(R"({"kernel_image_path": "/k/vmlinux",
      "initrd_path": "/k/initrd", "boot_args": "console=ttyS0 reboot=k"})"));
  EXPECT_EQ(full, (BootSourceRequest{"/k/vmlinux", "/k/initrd", "console=ttyS0 reboot=k"}));
  // Firecracker's optional fields may be null; boot_args may be empty (no arguments at all).
  ASSERT_OK_AND_ASSIGN(auto bare,
                       boot_source(R"({"kernel_image_path": "/k", "initrd_path": null})"));
  EXPECT_EQ(bare, (BootSourceRequest{"/k", "", std::nullopt}));
  ASSERT_OK_AND_ASSIGN(auto empty_args,
                       boot_source(R"({"kernel_image_path": "/k", "boot_args": ""})"));
  EXPECT_EQ(empty_args.boot_args, "");
}

TEST(ApiPrebootRequests, BootSourceRefusesBadBodies) {
  EXPECT_THAT(error_of(boot_source("")), HasSubstr("the body is empty"));
  EXPECT_THAT(error_of(boot_source(R"({"kernel_image_path": "/k")")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of(boot_source("{}")), HasSubstr("'kernel_image_path' is missing in the body"));
  EXPECT_THAT(error_of(boot_source(R"({"kernel_image_path": null})")),
              HasSubstr("'kernel_image_path' in the body must be a string, not null"));
  EXPECT_THAT(error_of(boot_source(R"({"kernel_image_path": 7})")),
              HasSubstr("must be a string, not an integer"));
  EXPECT_THAT(error_of(boot_source(R"({"kernel_image_path": "/k", "kernel": "/k"})")),
              HasSubstr("unknown field 'kernel' in the body"));
  EXPECT_THAT(error_of(boot_source(R"({"kernel_image_path": "/k", "initrd_path": ""})")),
              HasSubstr("'initrd_path' in the body must not be empty"));
}

TEST(ApiPrebootRequests, MachineConfigPutNeedsBothSizesAndPatchAtLeastOneField) {
  ASSERT_OK_AND_ASSIGN(auto put, machine_config(R"({"vcpu_count": 2, "mem_size_mib": 256,
      "smt": false, "track_dirty_pages": false, "cpu_template": "None", "huge_pages": "None"})",
                                                Update::kWhole));
  EXPECT_EQ(put, (MachineConfigUpdate{2, 256, false}));
  EXPECT_THAT(error_of(machine_config(R"({"vcpu_count": 2})", Update::kWhole)),
              HasSubstr("'mem_size_mib' is missing in the body"));
  ASSERT_OK_AND_ASSIGN(auto patch, machine_config(R"({"mem_size_mib": 512})", Update::kPartial));
  EXPECT_EQ(patch, (MachineConfigUpdate{std::nullopt, 512, std::nullopt}));
  // A PUT without smt turns it off, as Firecracker's default; a PATCH leaves it.
  ASSERT_OK_AND_ASSIGN(auto no_smt,
                       machine_config(R"({"vcpu_count": 2, "mem_size_mib": 8})", Update::kWhole));
  EXPECT_EQ(no_smt.smt, false);
  ASSERT_OK_AND_ASSIGN(auto smt, machine_config(R"({"smt": true})", Update::kPartial));
  EXPECT_EQ(smt, (MachineConfigUpdate{std::nullopt, std::nullopt, true}));
  EXPECT_THAT(error_of(machine_config("{}", Update::kPartial)),
              HasSubstr("the body changes nothing"));
  EXPECT_THAT(error_of(machine_config(R"({"vcpu_count": "2", "mem_size_mib": 1})", Update::kWhole)),
              HasSubstr("'vcpu_count' in the body must be a non-negative integer, not a string"));
  EXPECT_THAT(error_of(machine_config(R"({"vcpu_count": -1})", Update::kPartial)),
              HasSubstr("not a negative integer"));
  EXPECT_THAT(error_of(machine_config(R"({"vcpu_count": 1.5})", Update::kPartial)),
              HasSubstr("not a number with a fraction"));
  EXPECT_THAT(error_of(machine_config(R"({"vcpus": 2})", Update::kPartial)),
              HasSubstr("unknown field 'vcpus'"));
}

TEST(ApiPrebootRequests, MachineConfigRefusesWhatThisVmmCannotDo) {
  EXPECT_THAT(error_of(machine_config(R"({"smt": 1})", Update::kPartial)),
              HasSubstr("'smt' in the body must be a boolean"));
  EXPECT_THAT(error_of(machine_config(R"({"track_dirty_pages": true})", Update::kPartial)),
              HasSubstr("'track_dirty_pages': true is not supported: dsec-vmm has no diff"));
  EXPECT_THAT(error_of(machine_config(R"({"cpu_template": "T2"})", Update::kPartial)),
              HasSubstr("'cpu_template' \"T2\" is not supported"));
  EXPECT_THAT(error_of(machine_config(R"({"huge_pages": "2M"})", Update::kPartial)),
              HasSubstr("'huge_pages' \"2M\" is not supported"));
  EXPECT_THAT(
      error_of(machine_config(R"({"huge_pages": "1G"})", Update::kPartial)),
      HasSubstr("'huge_pages' must be one of \"None\", \"Transparent\", \"2M\", not \"1G\""));
  ASSERT_OK(machine_config(R"({"huge_pages": "Transparent"})", Update::kPartial));
}

TEST(ApiPrebootRequests, DriveTakesFirecrackersFieldsAndTheIdOfItsPath) {
  ASSERT_OK_AND_ASSIGN(auto root, drive(R"({"drive_id": "rootfs", "path_on_host": "/d/root.ext4",
      "is_root_device": true, "is_read_only": true, "partuuid": "0eaa91a0-01",
      "cache_type": "Writeback", "io_engine": "Async", "rate_limiter": null})"));
  EXPECT_EQ(root, (DriveRequest{"rootfs", "/d/root.ext4", true, true, "0eaa91a0-01"}));
  ASSERT_OK_AND_ASSIGN(auto data, drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x",
      "is_root_device": false})"));
  EXPECT_FALSE(data.is_read_only);  // Firecracker's default
  // A --config-file's drive has no path to agree with.
  ASSERT_OK(drive(R"({"drive_id": "scratch", "path_on_host": "/d/x", "is_root_device": false})",
                  std::nullopt));
}

TEST(ApiPrebootRequests, DriveRefusesBadBodies) {
  EXPECT_THAT(error_of(drive(R"({"drive_id": "other", "path_on_host": "/d/x",
      "is_root_device": false})")),
              HasSubstr("'drive_id' \"other\" in the body does not match \"rootfs\" in the path"));
  EXPECT_THAT(
      error_of(drive(R"({"drive_id": "a b", "path_on_host": "/d/x", "is_root_device": false})",
                     std::nullopt)),
      HasSubstr("'drive_id' \"a b\" is not an id"));
  EXPECT_THAT(error_of(drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x"})")),
              HasSubstr("'is_root_device' is missing in the body"));
  EXPECT_THAT(error_of(drive(R"({"drive_id": "rootfs", "is_root_device": false})")),
              HasSubstr("'path_on_host' is missing in the body"));
  EXPECT_THAT(error_of(drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x",
      "is_root_device": "yes"})")),
              HasSubstr("'is_root_device' in the body must be a boolean, not a string"));
  EXPECT_THAT(error_of(drive(R"({"drive_id": "rootfs", "socket": "/run/vhost.sock",
      "is_root_device": false})")),
              HasSubstr("'socket' in the body is not supported: dsec-vmm has no vhost-user-block"));
  EXPECT_THAT(error_of(drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x",
      "is_root_device": false, "cache_type": "None"})")),
              HasSubstr("'cache_type' must be one of \"Unsafe\", \"Writeback\", not \"None\""));
  EXPECT_THAT(error_of(drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x",
      "is_root_device": false, "readonly": true})")),
              HasSubstr("unknown field 'readonly'"));
}

TEST(ApiPrebootRequests, NetworkInterfaceTakesFirecrackersFields) {
  ASSERT_OK_AND_ASSIGN(auto full, net(R"({"iface_id": "net1", "host_dev_name": "tap0",
      "guest_mac": "06:00:AC:10:00:02", "rx_rate_limiter": null})"));
  EXPECT_EQ(full, (NetworkInterfaceRequest{"net1", "tap0", "06:00:AC:10:00:02"}));
  EXPECT_THAT(error_of(net(R"({"iface_id": "net1"})")),
              HasSubstr("'host_dev_name' is missing in the body"));
  EXPECT_THAT(error_of(net(R"({"iface_id": "eth0", "host_dev_name": "tap0"})")),
              HasSubstr("does not match \"net1\" in the path"));
  EXPECT_THAT(error_of(net(R"({"iface_id": "net1", "host_dev_name": "tap0", "mtu": 9000})")),
              HasSubstr("'mtu' in the body is not supported"));
}

TEST(ApiPrebootRequests, DrivesAndInterfacesTakeFirecrackersRateLimiters) {
  ASSERT_OK_AND_ASSIGN(auto limited, drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x",
      "is_root_device": false, "rate_limiter": {
        "bandwidth": {"size": 1048576, "one_time_burst": 4096, "refill_time": 1000},
        "ops": {"size": 100, "refill_time": 1000}}})"));
  EXPECT_EQ(
      limited.rate_limiter,
      (devices::RateLimiterConfig{.bandwidth = devices::TokenBucketConfig{.size = 1048576,
                                                                          .one_time_burst = 4096,
                                                                          .refill_time_ms = 1000},
                                  .ops = devices::TokenBucketConfig{
                                      .size = 100, .one_time_burst = 0, .refill_time_ms = 1000}}));
  ASSERT_OK_AND_ASSIGN(auto bytes_only, drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x",
      "is_root_device": false, "rate_limiter": {"bandwidth": {"size": 1, "refill_time": 1},
      "ops": null}})"));
  EXPECT_FALSE(bytes_only.rate_limiter.ops);
  EXPECT_TRUE(bytes_only.rate_limiter.limits());

  ASSERT_OK_AND_ASSIGN(auto iface, net(R"({"iface_id": "net1", "host_dev_name": "tap0",
      "rx_rate_limiter": {"ops": {"size": 10, "refill_time": 100}},
      "tx_rate_limiter": {"bandwidth": {"size": 0, "refill_time": 100}}})"));
  EXPECT_EQ(iface.rx_rate_limiter.ops,
            (devices::TokenBucketConfig{.size = 10, .one_time_burst = 0, .refill_time_ms = 100}));
  EXPECT_FALSE(iface.rx_rate_limiter.bandwidth);
  EXPECT_FALSE(iface.tx_rate_limiter.limits());  // size 0: no limit, as in Firecracker
  ASSERT_OK_AND_ASSIGN(auto plain, net(R"({"iface_id": "net1", "host_dev_name": "tap0"})"));
  EXPECT_EQ(plain.rx_rate_limiter, devices::RateLimiterConfig{});
}

TEST(ApiPrebootRequests, RateLimitersRefuseBadBucketsByName) {
  const auto limited = [](const std::string& limiter) {
    return drive(R"({"drive_id": "rootfs", "path_on_host": "/d/x", "is_root_device": false,
                     "rate_limiter": )" +
                 limiter + "}");
  };
  EXPECT_THAT(error_of(limited(R"({"bandwidth": {"size": -1, "refill_time": 100}})")),
              HasSubstr("'size' in rate_limiter.bandwidth must be a non-negative integer, not a "
                        "negative integer"));
  EXPECT_THAT(error_of(limited(R"({"ops": {"size": 1.5, "refill_time": 100}})")),
              HasSubstr("'size' in rate_limiter.ops must be a non-negative integer, not a number "
                        "with a fraction"));
  EXPECT_THAT(error_of(limited(R"({"ops": {"size": 1, "refill_time": "1s"}})")),
              HasSubstr("'refill_time' in rate_limiter.ops must be a non-negative integer, not a "
                        "string"));
  EXPECT_THAT(error_of(limited(R"({"ops": {"size": 1, "refill_time": 1, "one_time_burst": -5}})")),
              HasSubstr("'one_time_burst' in rate_limiter.ops must be a non-negative integer"));
  EXPECT_THAT(error_of(limited(R"({"ops": {"size": 1}})")),
              HasSubstr("'refill_time' is missing in rate_limiter.ops"));
  EXPECT_THAT(error_of(limited(R"({"ops": {"size": 1, "refill_time": 1, "burst": 1}})")),
              HasSubstr("unknown field 'burst' in rate_limiter.ops"));
  EXPECT_THAT(error_of(limited(R"({"bytes": {"size": 1, "refill_time": 1}})")),
              HasSubstr("unknown field 'bytes' in rate_limiter"));
  EXPECT_THAT(error_of(limited(R"("fast")")),
              HasSubstr("'rate_limiter' in the body must be an object, not a string"));
  EXPECT_THAT(error_of(limited(R"({"ops": [1, 1]})")),
              HasSubstr("'ops' in rate_limiter must be an object, not an array"));
  EXPECT_THAT(error_of(net(R"({"iface_id": "net1", "host_dev_name": "tap0",
      "tx_rate_limiter": {"ops": {"size": 1, "refill_time": -1}}})")),
              HasSubstr("'refill_time' in tx_rate_limiter.ops must be a non-negative integer"));
  EXPECT_THAT(error_of(net(R"({"iface_id": "net1", "host_dev_name": "tap0",
      "rate_limiter": {"ops": {"size": 1, "refill_time": 1}}})")),
              HasSubstr("unknown field 'rate_limiter'"));
}

TEST(ApiPrebootRequests, VsockEntropyLoggerAndActions) {
  ASSERT_OK_AND_ASSIGN(auto v, vsock(R"({"guest_cid": 3, "uds_path": "/run/v.sock",
                                         "vsock_id": "vsock0"})"));
  EXPECT_EQ(v, (VsockRequest{3, "/run/v.sock"}));
  EXPECT_THAT(error_of(vsock(R"({"guest_cid": 3})")), HasSubstr("'uds_path' is missing"));
  EXPECT_THAT(error_of(vsock(R"({"guest_cid": -3, "uds_path": "/v"})")),
              HasSubstr("not a negative integer"));

  ASSERT_OK_AND_ASSIGN(auto plain, entropy("{}"));
  EXPECT_FALSE(plain.rate_limiter.limits());
  ASSERT_OK_AND_ASSIGN(auto limited, entropy(R"({"rate_limiter": {
      "bandwidth": {"size": 1024, "refill_time": 100}, "ops": null}})"));
  EXPECT_EQ(limited.rate_limiter.bandwidth,
            (devices::TokenBucketConfig{.size = 1024, .one_time_burst = 0, .refill_time_ms = 100}));
  EXPECT_FALSE(limited.rate_limiter.ops);
  EXPECT_THAT(error_of(entropy(R"({"rate_limiter": {"ops": {"size": -1, "refill_time": 1}}})")),
              HasSubstr("'size' in rate_limiter.ops must be a non-negative integer"));

  ASSERT_OK_AND_ASSIGN(auto log, logger(R"({"log_path": "/run/fc.log", "level": "debug",
      "show_level": true, "show_log_origin": true})"));
  EXPECT_EQ(log, (LoggerRequest{"/run/fc.log", LogLevel::kDebug, true, true}));
  EXPECT_THAT(error_of(logger(R"({"level": "Loud"})")), HasSubstr("'level' must be one of"));
  ASSERT_OK_AND_ASSIGN(auto warn, logger(R"({"level": "warn"})"));  // Firecracker takes it
  EXPECT_EQ(warn.level, LogLevel::kWarning);
  EXPECT_THAT(error_of(logger(R"({"module": "api_server"})")),
              HasSubstr("'module' in the body is not supported"));

  ASSERT_OK_AND_ASSIGN(auto start, action(R"({"action_type": "InstanceStart"})"));
  EXPECT_EQ(start, Action::kInstanceStart);
  ASSERT_OK_AND_ASSIGN(auto cad, action(R"({"action_type": "SendCtrlAltDel"})"));
  EXPECT_EQ(cad, Action::kSendCtrlAltDel);
  EXPECT_THAT(error_of(action(R"({"action_type": "Reboot"})")),
              HasSubstr("'action_type' must be \"InstanceStart\", \"SendCtrlAltDel\" or "
                        "\"FlushMetrics\", not \"Reboot\""));
  EXPECT_THAT(error_of(action(R"({"action_type": "InstanceStart", "payload": 1})")),
              HasSubstr("unknown field 'payload'"));
}

}  // namespace
}  // namespace dsec::api

// The API's request bodies: every field's validation (malformed JSON, unknown fields,
// wrong types, missing fields, unsupported values), and what a valid body becomes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "vmm/api/vm_requests.h"

namespace dsec::api {
namespace {

using test::error_of;
using ::testing::HasSubstr;

TEST(ApiVmRequests, VmStateTakesPausedAndResumed) {
  ASSERT_OK_AND_ASSIGN(auto paused, parse_vm_state(R"({"state": "Paused"})"));
  EXPECT_EQ(paused, VmStateChange::kPause);
  ASSERT_OK_AND_ASSIGN(auto resumed, parse_vm_state(R"({"state":"Resumed"})"));
  EXPECT_EQ(resumed, VmStateChange::kResume);
}

TEST(ApiVmRequests, VmStateRefusesEverythingElse) {
  EXPECT_THAT(error_of(parse_vm_state("")),
              HasSubstr("the body is empty: it must be a JSON object"));
  EXPECT_THAT(error_of(parse_vm_state("{")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of(parse_vm_state("[]")), HasSubstr("must be a JSON object, not an array"));
  EXPECT_THAT(error_of(parse_vm_state("{}")), HasSubstr("'state' is missing in the body"));
  EXPECT_THAT(error_of(parse_vm_state(R"({"state": 1})")),
              HasSubstr("'state' in the body must be a string, not an integer"));
  EXPECT_THAT(error_of(parse_vm_state(R"({"state": null})")), HasSubstr("not null"));
  EXPECT_THAT(error_of(parse_vm_state(R"({"state": "paused"})")),
              HasSubstr("'state' must be \"Paused\" or \"Resumed\", not \"paused\""));
  EXPECT_THAT(error_of(parse_vm_state(R"({"state": "Paused", "extra": 1})")),
              HasSubstr("unknown field 'extra' in the body (known fields: state)"));
}

TEST(ApiVmRequests, SnapshotCreateTakesFirecrackersFields) {
  ASSERT_OK_AND_ASSIGN(auto full, parse_snapshot_create(
                                      R"({"snapshot_type": "Full", "snapshot_path": "/s/state",
                                          "mem_file_path": "/s/memory"})"));
  EXPECT_EQ(full, (SnapshotCreateRequest{"/s/state", "/s/memory"}));
  ASSERT_OK_AND_ASSIGN(auto untyped,
                       parse_snapshot_create(R"({"snapshot_path": "a", "mem_file_path": "b"})"));
  EXPECT_EQ(untyped, (SnapshotCreateRequest{"a", "b"}));
}

TEST(ApiVmRequests, SnapshotCreateRefusesBadBodies) {
  EXPECT_THAT(error_of(parse_snapshot_create(R"({"mem_file_path": "b"})")),
              HasSubstr("'snapshot_path' is missing"));
  EXPECT_THAT(error_of(parse_snapshot_create(R"({"snapshot_path": "a"})")),
              HasSubstr("'mem_file_path' is missing"));
  EXPECT_THAT(error_of(parse_snapshot_create(R"({"snapshot_path": "", "mem_file_path": "b"})")),
              HasSubstr("'snapshot_path' in the body must not be empty"));
  EXPECT_THAT(
      error_of(parse_snapshot_create(R"({"snapshot_path": "a\u0000b", "mem_file_path": "b"})")),
      HasSubstr("must not contain a NUL"));
  EXPECT_THAT(error_of(parse_snapshot_create(R"({"snapshot_path": ["a"], "mem_file_path": "b"})")),
              HasSubstr("'snapshot_path' in the body must be a string, not an array"));
  EXPECT_THAT(error_of(parse_snapshot_create(
                  R"({"snapshot_type": "Diff", "snapshot_path": "a", "mem_file_path": "b"})")),
              HasSubstr("\"Diff\" is not supported"));
  EXPECT_THAT(error_of(parse_snapshot_create(
                  R"({"snapshot_type": "Half", "snapshot_path": "a", "mem_file_path": "b"})")),
              HasSubstr("must be \"Full\", not \"Half\""));
  EXPECT_THAT(error_of(parse_snapshot_create(
                  R"({"snapshot_path": "a", "mem_file_path": "b", "version": "1.0"})")),
              HasSubstr("unknown field 'version'"));
  EXPECT_THAT(error_of(parse_snapshot_create(R"({"snapshot_path": "a", "mem_file_path": "a"})")),
              HasSubstr("name the same file"));
}

TEST(ApiVmRequests, SnapshotLoadTakesMemBackendAndOverrides) {
  ASSERT_OK_AND_ASSIGN(auto load, parse_snapshot_load(R"({
      "snapshot_path": "/s/state",
      "mem_backend": {"backend_type": "File", "backend_path": "/s/memory"},
      "enable_diff_snapshots": false,
      "resume_vm": true,
      "network_overrides": [{"iface_id": "eth0", "host_dev_name": "tap7"}],
      "vsock_override": {"uds_path": "/run/clone.vsock"}})"));
  EXPECT_EQ(load.snapshot_path, "/s/state");
  EXPECT_EQ(load.mem_file_path, "/s/memory");
  EXPECT_TRUE(load.resume_vm);
  ASSERT_EQ(load.network_overrides.size(), 1u);
  EXPECT_EQ(load.network_overrides[0], (NetworkOverride{"eth0", "tap7"}));
  EXPECT_EQ(load.vsock_uds_path, "/run/clone.vsock");
  const auto overrides = restore_overrides(load);
  ASSERT_EQ(overrides.nets.size(), 1u);
  EXPECT_EQ(overrides.nets[0].iface_id, "eth0");
  EXPECT_EQ(overrides.nets[0].tap, "tap7");
  EXPECT_EQ(overrides.vsock_uds_path, "/run/clone.vsock");
  EXPECT_FALSE(overrides.vsock_guest_cid);
}

TEST(ApiVmRequests, SnapshotLoadTakesTheOlderMemFilePath) {
  ASSERT_OK_AND_ASSIGN(auto load,
                       parse_snapshot_load(R"({"snapshot_path": "a", "mem_file_path": "b"})"));
  EXPECT_EQ(load.mem_file_path, "b");
  EXPECT_FALSE(load.resume_vm);
  EXPECT_TRUE(load.network_overrides.empty());
  EXPECT_FALSE(load.vsock_uds_path);
  const auto overrides = restore_overrides(load);
  EXPECT_TRUE(overrides.nets.empty());
  EXPECT_FALSE(overrides.vsock_uds_path);
}

TEST(ApiVmRequests, SnapshotLoadRefusesBadBodies) {
  const auto err = [](const char* body) { return error_of(parse_snapshot_load(body)); };
  EXPECT_THAT(err(R"({"snapshot_path": "a"})"), HasSubstr("exactly one of 'mem_backend'"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b",
                      "mem_backend": {"backend_type": "File", "backend_path": "b"}})"),
              HasSubstr("exactly one of"));
  EXPECT_THAT(err(R"({"mem_file_path": "b"})"), HasSubstr("'snapshot_path' is missing"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_backend": {"backend_type": "Uffd",
                      "backend_path": "/run/uffd.sock"}})"),
              HasSubstr("\"Uffd\" is not supported"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_backend": {"backend_type": "File"}})"),
              HasSubstr("'backend_path' is missing in mem_backend"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_backend": {"backend_type": "File",
                      "backend_path": "b", "x": 1}})"),
              HasSubstr("unknown field 'x' in mem_backend"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_backend": "b"})"),
              HasSubstr("'mem_backend' in the body must be an object, not a string"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "resume_vm": "yes"})"),
              HasSubstr("'resume_vm' in the body must be a boolean, not a string"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "enable_diff_snapshots": true})"),
              HasSubstr("'enable_diff_snapshots': true is not supported"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "track_dirty_pages": true})"),
              HasSubstr("'track_dirty_pages': true is not supported"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "network_overrides": {}})"),
              HasSubstr("'network_overrides' in the body must be an array, not an object"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "network_overrides": [1]})"),
              HasSubstr("network_overrides[0] must be a JSON object"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b",
                      "network_overrides": [{"iface_id": "eth0"}]})"),
              HasSubstr("'host_dev_name' is missing in network_overrides[0]"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b",
                      "network_overrides": [{"iface_id": "eth0", "host_dev_name": "t",
                                             "guest_mac": "x"}]})"),
              HasSubstr("unknown field 'guest_mac' in network_overrides[0]"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "vsock_override": {}})"),
              HasSubstr("'uds_path' is missing in vsock_override"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b",
                      "vsock_override": {"uds_path": 5}})"),
              HasSubstr("'uds_path' in vsock_override must be a string, not an integer"));
  EXPECT_THAT(err(R"({"snapshot_path": "a", "mem_file_path": "b", "resume": true})"),
              HasSubstr("unknown field 'resume'"));
}

TEST(ApiVmRequests, EachOverrideNamesItsNetworkInterface) {
  SnapshotLoadRequest load{.snapshot_path = "a",
                           .mem_file_path = "b",
                           .resume_vm = false,
                           .network_overrides = {{"net1", "tap0"}},
                           .vsock_uds_path = {}};
  load.network_overrides = {{"net1", "tap0"}, {"net2", "tap1"}};
  // The restore checks them against the snapshot's interfaces (snapshot_config_test).
  const auto overrides = restore_overrides(load);
  ASSERT_EQ(overrides.nets.size(), 2u);
  EXPECT_EQ(overrides.nets[0].iface_id, "net1");
  EXPECT_EQ(overrides.nets[0].tap, "tap0");
  EXPECT_EQ(overrides.nets[1].iface_id, "net2");
  EXPECT_EQ(overrides.nets[1].tap, "tap1");
  EXPECT_FALSE(overrides.nets[1].tap_fd);
}

}  // namespace
}  // namespace dsec::api

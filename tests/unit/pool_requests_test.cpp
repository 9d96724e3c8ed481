// The pool API's request bodies and the daemon's state records: what valid input becomes,
// and the message each kind of bad input gets.
#include "vmm/pool/pool_requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/pool/state_records.h"

namespace dsec::pool {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string error_of(const Result<T>& r) {
  return r ? std::string("(it was accepted)") : r.error().message();
}

TEST(PoolRequests, ImageSpecTakesItsLimits) {
  ASSERT_OK_AND_ASSIGN(auto spec, parse_image_spec("base", R"({"ready": 2, "max": 8, "ttl_s": 600,
                                                             "idle_timeout_s": 60})"));
  EXPECT_EQ(spec,
            (ImageSpec{.name = "base", .ready = 2, .max = 8, .ttl_s = 600, .idle_timeout_s = 60}));
  ASSERT_OK_AND_ASSIGN(auto back, image_spec_from_json(image_spec_json(spec)));
  EXPECT_EQ(back, spec);
  ASSERT_OK_AND_ASSIGN(auto defaults, parse_image_spec("b", "{}"));
  EXPECT_EQ(defaults.ready, 0U);
  EXPECT_EQ(defaults.max, 1U);
  EXPECT_EQ(defaults.ttl_s, 0U);
  EXPECT_EQ(defaults.idle_timeout_s, 0U);
}

TEST(PoolRequests, ImageSpecRefusesBadInput) {
  EXPECT_THAT(error_of(parse_image_spec("b", "")), HasSubstr("the body is empty"));
  EXPECT_THAT(error_of(parse_image_spec("b", "{")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of(parse_image_spec("b", R"({"size": 1})")), HasSubstr("unknown field 'size'"));
  EXPECT_THAT(error_of(parse_image_spec("b", R"({"ready": 3, "max": 2})")),
              HasSubstr("'ready' (3) is more than 'max' (2)"));
  EXPECT_THAT(error_of(parse_image_spec("b", R"({"max": 0})")), HasSubstr("'max' at least 1"));
  EXPECT_THAT(error_of(parse_image_spec("b", R"({"max": 99999})")), HasSubstr("at most 4096"));
  EXPECT_THAT(error_of(parse_image_spec("b", R"({"ready": -1})")),
              HasSubstr("non-negative integer"));
  EXPECT_THAT(error_of(parse_image_spec("../x", "{}")),
              HasSubstr("an image's name must be 1 to 64 letters"));
  EXPECT_THAT(error_of(parse_image_spec(".hidden", "{}")),
              HasSubstr("beginning with a letter or digit"));
}

// Images are named: a path in the body, where clients used to give one, is refused with
// where the image goes instead.
TEST(PoolRequests, ASnapshotDirInABodyIsRefusedSayingToUseTheStore) {
  EXPECT_THAT(error_of(parse_image_spec("base", R"({"snapshot_dir": "/run/warm", "max": 2})")),
              HasSubstr("put the image in the store as base (dsec-vmm warm --out "
                        "IMAGE_DIR/base)"));
  EXPECT_THAT(error_of(parse_snapshot_name(R"({"snapshot_dir": "/srv/forks/a"})")),
              HasSubstr("'snapshot_dir' is gone: images live in the daemon's image store"));
  EXPECT_THAT(error_of(parse_snapshot_name(R"({"name": "a", "snapshot_dir": "/srv/a"})")),
              HasSubstr("'snapshot_dir' is gone"));
}

TEST(PoolRequests, ASnapshotNamesAnImageOfTheStore) {
  ASSERT_OK_AND_ASSIGN(auto name, parse_snapshot_name(R"({"name": "fork-1.b_2"})"));
  EXPECT_EQ(name, "fork-1.b_2");
  EXPECT_THAT(error_of(parse_snapshot_name(R"({"name": ""})")), HasSubstr("must not be empty"));
  for (const char* bad :
       {"../etc", "/srv/forks/a", "a/b", ".staging-1", "a..b", "-a", "_a", "a b", "a\\b"}) {
    EXPECT_THAT(error_of(parse_snapshot_name(nlohmann::json{{"name", bad}}.dump())),
                HasSubstr("'name': an image's name must be"))
        << bad;
  }
  EXPECT_THAT(error_of(parse_snapshot_name("{}")), HasSubstr("'name'"));
  EXPECT_THAT(error_of(parse_snapshot_name(R"({"name": "a", "resume": true})")),
              HasSubstr("unknown field 'resume'"));
}

TEST(PoolRequests, AcquireNamesAnImage) {
  ASSERT_OK_AND_ASSIGN(auto acquire, parse_acquire(R"({"image": "base", "ttl_s": 30})"));
  EXPECT_EQ(acquire.image, "base");
  EXPECT_EQ(acquire.ttl_s, 30U);
  EXPECT_THAT(error_of(parse_acquire(R"({})")), HasSubstr("'image'"));
  EXPECT_THAT(error_of(parse_acquire(R"({"image": 7})")), HasSubstr("must be a string"));
  EXPECT_THAT(error_of(parse_acquire(R"({"image": "b", "cpus": 2})")),
              HasSubstr("unknown field 'cpus'"));
  EXPECT_THAT(error_of(parse_acquire(R"({"image": "b", "ttl_s": 999999999})")),
              HasSubstr("'ttl_s' must be at most"));
  ASSERT_OK_AND_ASSIGN(auto leased, parse_acquire(R"({"image": "b", "idle_timeout_s": 45})"));
  EXPECT_EQ(leased.idle_timeout_s, 45U);
  EXPECT_EQ(leased.ttl_s, std::nullopt);
  EXPECT_THAT(error_of(parse_acquire(R"({"image": "b", "idle_timeout_s": 999999999})")),
              HasSubstr("'idle_timeout_s' must be at most"));
  EXPECT_THAT(error_of(parse_acquire(R"({"image": "b", "idle_timeout_s": -1})")),
              HasSubstr("idle_timeout_s"));
}

TEST(PoolRequests, ExecTakesArgvEnvCwdTimeoutAndStdin) {
  ASSERT_OK_AND_ASSIGN(auto call, parse_exec(R"({"argv": ["sh", "-c", "cat"], "env": ["A=1"],
                                                  "cwd": "/tmp", "timeout_ms": 5000,
                                                  "stdin": "hello"})"));
  EXPECT_EQ(call.request.argv, (std::vector<std::string>{"sh", "-c", "cat"}));
  EXPECT_EQ(call.request.env, (std::vector<std::string>{"A=1"}));
  EXPECT_EQ(call.request.cwd, "/tmp");
  EXPECT_EQ(call.request.timeout_ms, 5000U);
  EXPECT_TRUE(call.request.stdin_open);
  EXPECT_EQ(call.stdin_data, "hello");
  ASSERT_OK_AND_ASSIGN(auto plain, parse_exec(R"({"argv": ["true"]})"));
  EXPECT_EQ(plain.request.timeout_ms, 60000U) << "an exec is never unbounded";
  EXPECT_FALSE(plain.request.stdin_open);
}

TEST(PoolRequests, ExecRefusesBadInput) {
  EXPECT_THAT(error_of(parse_exec(R"({"argv": []})")), HasSubstr("'argv' must name a program"));
  EXPECT_THAT(error_of(parse_exec(R"({"argv": "ls"})")), HasSubstr("must be an array"));
  EXPECT_THAT(error_of(parse_exec(R"({"argv": ["ls", 3]})")),
              HasSubstr("'argv' must be an array of strings"));
  EXPECT_THAT(error_of(parse_exec(R"({"argv": ["ls"], "env": ["NOEQUALS"]})")),
              HasSubstr("NAME=value"));
  EXPECT_THAT(error_of(parse_exec(R"({"argv": ["ls"], "timeout_ms": 0})")),
              HasSubstr("'timeout_ms' must be 1 to 600000"));
  EXPECT_THAT(error_of(parse_exec(R"({"argv": ["ls"], "shell": true})")),
              HasSubstr("unknown field 'shell'"));
}

TEST(PoolStateRecords, ARecordReadsBackAsWritten) {
  const SandboxRecord record{
      .id = "sb-0123",
      .image = "base",
      .process = {.pid = 4242, .start_time = 987654},
      .files = {.vsock = "/s/sb-0123.vsock", .log = "/s/sb-0123.log", .api = "/s/sb-0123.api"},
      .state = SandboxState::kInUse,
      .expires_at_ms = 1700000000123,
      .idle_timeout_ms = 30000,
      .paused = true,
      .owner = "uid:1000"};
  ASSERT_OK_AND_ASSIGN(auto back, parse_record(record_text(record)));
  EXPECT_EQ(back, record);
  // The pool's own clone (no owner yet) reads back as no one's.
  SandboxRecord ready = record;
  ready.state = SandboxState::kReady;
  ready.owner.clear();
  ASSERT_OK_AND_ASSIGN(auto unowned, parse_record(record_text(ready)));
  EXPECT_EQ(unowned.owner, "");
}

// A clone with a network keeps its slot and the egress it has now, for a daemon started
// again to adopt its network with them.
TEST(PoolStateRecords, AClonesNetworkSlotAndEgressReadBack) {
  SandboxRecord record{.id = "sb-0123",
                       .image = "net",
                       .process = {.pid = 4242, .start_time = 987654},
                       .files = {.vsock = "/s/v", .log = "/s/l", .api = "/s/a"},
                       .state = SandboxState::kInUse,
                       .expires_at_ms = 0};
  record.network_slot = 7;
  record.egress = {.mode = network::EgressPolicy::Mode::kAllowList,
                   .allow = {{.destination = {.address = 0x0A000000, .prefix = 8},
                              .first_port = 443,
                              .last_port = 443}}};
  record.ports = {{.guest_port = 8000, .host_port = 30000}, {.guest_port = 22, .host_port = 30007}};
  ASSERT_OK_AND_ASSIGN(auto back, parse_record(record_text(record)));
  EXPECT_EQ(back, record);
  EXPECT_THAT(record_text(record), HasSubstr(R"("allow":["10.0.0.0/8:443"])"));
  EXPECT_THAT(record_text(record), HasSubstr(R"({"guest_port":8000,"host_port":30000})"));
}

TEST(PoolStateRecords, ForwardedPortsOutOfRangeOrTooManyAreRefused) {
  const std::string start =
      R"({"id":"sb-1","image":"b","pid":5,"start_time":1,"vsock":"/v","log":"/l",)"
      R"("state":"in_use","expires_at_ms":0,"ports":)";
  EXPECT_THAT(error_of(parse_record(start + R"([{"guest_port":0,"host_port":30000}]})")),
              HasSubstr("out of range"));
  EXPECT_THAT(error_of(parse_record(start + R"([{"guest_port":80,"host_port":70000}]})")),
              HasSubstr("out of range"));
  EXPECT_FALSE(parse_record(start + R"([{"guest_port":80}]})").has_value());
  std::string many = "[";
  for (int i = 0; i < 65; ++i) {
    many += std::string(i == 0 ? "" : ",") + R"({"guest_port":80,"host_port":30000})";
  }
  EXPECT_THAT(error_of(parse_record(start + many + "]}")), HasSubstr("more than 64 ports"));
}

// A record written before idle timeouts and clone API sockets existed still reads, with
// none, and not paused.
TEST(PoolStateRecords, ARecordWithoutAnIdleTimeoutOrApiSocketReadsAsNone) {
  ASSERT_OK_AND_ASSIGN(auto back,
                       parse_record(R"({"id": "sb-1", "image": "base", "pid": 42, "start_time": 7,
                                  "vsock": "/s/v", "log": "/s/l", "state": "in_use",
                                  "expires_at_ms": 0})"));
  EXPECT_EQ(back.idle_timeout_ms, 0U);
  EXPECT_EQ(back.files.api, "");
  EXPECT_FALSE(back.paused);
}

TEST(PoolStateRecords, ADamagedRecordIsRefusedWithWhy) {
  EXPECT_THAT(error_of(parse_record("{")), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of(parse_record(R"({"id": "sb-1"})")), HasSubstr("'image'"));
  const std::string bad_state =
      R"({"id":"sb-1","image":"b","pid":5,"start_time":1,"vsock":"/v","log":"/l",)"
      R"("state":"flying","expires_at_ms":0})";
  EXPECT_THAT(error_of(parse_record(bad_state)), HasSubstr("unknown sandbox state \"flying\""));
  const std::string bad_id =
      R"({"id":"../x","image":"b","pid":5,"start_time":1,"vsock":"/v","log":"/l",)"
      R"("state":"ready","expires_at_ms":0})";
  EXPECT_THAT(error_of(parse_record(bad_id)), HasSubstr("a sandbox's id must be"));
}

TEST(PoolStateRecords, TheStateDirectoryKeepsRecordsAndImages) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto state, StateDir::open(dir.file("state")));
  SandboxRecord record{.id = "sb-1",
                       .image = "base",
                       .process = {.pid = 1, .start_time = 1},
                       .files = state.files_for("sb-1"),
                       .state = SandboxState::kReady,
                       .expires_at_ms = 0};
  ASSERT_OK(state.write_record(record));
  std::ofstream(dir.file("state/sandboxes/sb-2.json")) << "{ not json";
  std::vector<std::string> unreadable;
  const auto records = state.read_records(unreadable);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0], record);
  ASSERT_EQ(unreadable.size(), 1U);
  EXPECT_THAT(unreadable[0], HasSubstr("sb-2.json: the record is not valid JSON"));

  const std::vector<ImageSpec> images{{.name = "a", .ready = 1, .max = 2, .ttl_s = 0},
                                      {.name = "b", .ready = 0, .max = 1, .ttl_s = 9}};
  ASSERT_OK(state.write_images(images));
  ASSERT_OK_AND_ASSIGN(auto back, state.read_images());
  EXPECT_EQ(back, images);

  state.remove_record("sb-1");
  std::filesystem::remove(dir.file("state/sandboxes/sb-2.json"));
  state.remove_own_files();
  EXPECT_FALSE(std::filesystem::exists(dir.file("state/images.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("state/sandboxes")));
}

TEST(PoolRequests, AFileTargetIsAnAbsolutePathAndOctalPermissionBits) {
  auto target = parse_file_target("/tmp/x", "600");
  ASSERT_TRUE(target) << target.error().message();
  EXPECT_EQ(target->guest_path, "/tmp/x");
  EXPECT_EQ(target->mode, 0600U);
  EXPECT_EQ(parse_file_target("/tmp/x", "")->mode, 0644U) << "the default";
  for (const auto* path : {"", "tmp/x", "relative"}) {
    EXPECT_FALSE(parse_file_target(path, "")) << path;
  }
  EXPECT_FALSE(parse_file_target(std::string("/a\0b", 4), ""));
  EXPECT_FALSE(parse_file_target("/" + std::string(5000, 'a'), ""));
  for (const auto* mode : {"4755", "1000", "9", "0x1ff", "-1", "644 "}) {
    const auto refused = parse_file_target("/tmp/x", mode);
    ASSERT_FALSE(refused) << mode;
    EXPECT_THAT(refused.error().message(), ::testing::HasSubstr("X-Dsec-Mode"));
  }
}

}  // namespace
}  // namespace dsec::pool

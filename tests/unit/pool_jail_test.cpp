// The pool's jail, as far as it is bookkeeping: the ids in the pool (one per live clone,
// never two at once, freed when a clone is gone, adopted after a restart), the `dsec-vmm
// restore` command line a clone gets, --no-jail's gauge, and a clone its cgroup's OOM
// killer ended reported lost as such. The jail itself is seen at work in
// tests/e2e/pool_jail_test.cpp.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "tests/unit/pool_test_fixture.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {
namespace {

using namespace test_fixture;
using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using ::testing::Not;

CloneLaunch clone(std::optional<uint32_t> jail_id) {
  return {.state_fd = 7,
          .memory_fd = 8,
          .guest_bytes = uint64_t{256} << 20,
          .dir = "/run/pool/sandboxes/sb-1",
          .files = {.vsock = "/run/pool/sandboxes/sb-1/vsock",
                    .log = "/run/pool/sandboxes/sb-1.log",
                    .api = "/run/pool/sandboxes/sb-1/api"},
          .jail_id = jail_id};
}

TEST(PoolRestoreArgv, AJailedCloneGetsItsDirectoryIdsCgroupAndLimitsThenTheExtraArguments) {
  CloneLimits limits;
  limits.cpu_max = "200000 100000";
  limits.console_limit_bytes = 65536;
  limits.log_limit_bytes = 32768;
  const auto argv = restore_argv("/bin/dsec-vmm", clone(200007), limits, {"--seccomp=log"});
  EXPECT_THAT(
      argv,
      ElementsAre("/bin/dsec-vmm", "restore", "--state-fd", "4", "--memory-fd", "5", "--vsock",
                  "/run/pool/sandboxes/sb-1/vsock", "--ready-fd", "3",
                  "--no-host-paths-from-snapshot", "--console", "/run/pool/sandboxes/sb-1/console",
                  "--console-limit", "65536", "--log-limit", "32768", "--api-sock",
                  "/run/pool/sandboxes/sb-1/api", "--jail", "/run/pool/sandboxes/sb-1",
                  "--jail-no-supervisor", "--uid",
                  "200007", "--gid", "200007", "--cgroup-parent", "dsec-vmm-pool", "--cgroup",
                  // 256 MiB of guest RAM and 64 MiB for the VMM
                  "memory.max=335544320", "--cgroup", "pids.max=512", "--cgroup",
                  "cpu.max=200000 100000", "--seccomp=log"));
}

TEST(PoolRestoreArgv, AnUnjailedCloneHasItsConsoleAndLogCappedAndNoJail) {
  const auto argv = restore_argv("/bin/dsec-vmm", clone(std::nullopt), CloneLimits{}, {});
  EXPECT_THAT(argv, IsSupersetOf({"--console", "/run/pool/sandboxes/sb-1/console",
                                  "--console-limit", "1048576", "--log-limit", "1048576"}));
  EXPECT_THAT(argv, Not(::testing::Contains("--jail")));
  EXPECT_THAT(argv, Not(::testing::Contains("--uid")));
}

// A clone with a network joins its namespace and opens the TAP the daemon named there, not
// the one its snapshot names (docs/network.md, "The pool's clones").
TEST(PoolRestoreArgv, ACloneWithANetworkJoinsItsNamespaceAndNamesItsTap) {
  CloneLaunch launch = clone(200007);
  launch.netns = "/run/netns/dp0ac80004";
  launch.tap = "dsnet0";
  const auto argv = restore_argv("/bin/dsec-vmm", launch, CloneLimits{}, {});
  EXPECT_THAT(argv, IsSupersetOf({"--no-host-paths-from-snapshot", "--netns",
                                  "/run/netns/dp0ac80004", "--net", "tap=dsnet0"}));
  EXPECT_THAT(restore_argv("/bin/dsec-vmm", clone(200007), CloneLimits{}, {}),
              Not(::testing::Contains("--netns")));
}

// A clone gets its image's files as the descriptors restore_argv names (--state-fd 4
// --memory-fd 5), whatever their numbers in the daemon, and no other of the daemon's.
TEST(PoolLaunch, TheCloneInheritsItsImagesFilesAsFourAndFiveAndNoOtherDescriptor) {
  test::TempDir dir;
  std::ofstream(dir.file("state")) << "S";
  std::ofstream(dir.file("memory")) << "M";
  const UniqueFd state(::open(dir.file("state").c_str(), O_RDONLY | O_CLOEXEC));
  const UniqueFd memory(::open(dir.file("memory").c_str(), O_RDONLY | O_CLOEXEC));
  // One of the daemon's that is not CLOEXEC, above the clone's.
  const UniqueFd opened(::open(dir.file("state").c_str(), O_RDONLY));
  const UniqueFd other(::fcntl(opened.get(), F_DUPFD, 20));
  ASSERT_TRUE(state && memory && other);
  const std::string log = dir.file("log");
  ASSERT_OK_AND_ASSIGN(
      auto child,
      spawn_with_ready_pipe({"/bin/sh", "-c",
                             "cat <&4; cat <&5; for fd in 6 7 8 9 " + std::to_string(other.get()) +
                                 "; do [ -e /proc/$$/fd/$fd ] && echo \" leaked $fd\"; done; "
                                 "echo ready >&3; exec sleep 600"},
                            log, {state.get(), memory.get()}));
  char ready[6] = {};
  EXPECT_EQ(::read(child.ready.get(), ready, sizeof ready), 6);
  EXPECT_TRUE(signal_pidfd(child.pidfd.get(), SIGKILL));
  ::waitpid(child.identity.pid, nullptr, 0);
  EXPECT_EQ(test::file_text(log), "SM");
}

class PoolJailTest : public PoolTest {
 protected:
  // A pool over shell "VMMs" that records each launch, its ids from `range` (none: --no-jail).
  std::unique_ptr<Pool> jailed_pool(std::optional<JailIdRange> range,
                                    const char* script = kServes) {
    auto launcher = std::make_unique<ShellLauncher>(script);
    launcher_ = launcher.get();
    return make_pool(
        std::move(launcher),
        PoolOptions{.health_interval = std::chrono::milliseconds(0), .jail_ids = range});
  }
  std::vector<std::optional<uint32_t>> launched_ids() const {
    std::vector<std::optional<uint32_t>> ids;
    for (const auto& clone : launcher_->launched()) {
      ids.push_back(clone.jail_id);
    }
    return ids;
  }
  // An acquire that must succeed: the sandbox.
  nlohmann::json take(Pool& pool) {
    auto answer = acquire_now(pool, {.image = "base", .ttl_s = std::nullopt});
    EXPECT_TRUE(answer) << (answer ? "" : answer.error().message);
    return answer.value_or(nlohmann::json::object());
  }
  ShellLauncher* launcher_ = nullptr;
};

TEST_F(PoolJailTest, NoTwoLiveClonesShareAnIdAndARemovedClonesIdIsFreed) {
  auto pool = jailed_pool(JailIdRange{.first = 300, .last = 301});
  ASSERT_TRUE(pool->register_image(image(0, 3)));
  const auto first = take(*pool);
  const auto second = take(*pool);
  EXPECT_THAT(launched_ids(), ElementsAre(300U, 301U));
  const auto dir = state_dir() + "/sandboxes/" + first["id"].get<std::string>();
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << "each clone has a directory of its own";
  EXPECT_EQ(first["vsock"], dir + "/vsock");

  const auto third = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().kind, Failure::kFull);
  EXPECT_THAT(third.error().message, HasSubstr("every id of --jail-ids 300-301"));

  ASSERT_TRUE(pool->release(kOperator, first["id"]));
  ASSERT_TRUE(run_until([&] { return !std::filesystem::exists(dir); }));
  take(*pool);
  EXPECT_THAT(launched_ids(), ElementsAre(300U, 301U, 300U)) << "the freed id, not 301 again";
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_jail_enabled 1"));
}

TEST_F(PoolJailTest, NoJailLaunchesWithoutIdsAndSaysSoInTheMetrics) {
  auto pool = jailed_pool(std::nullopt);
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  take(*pool);
  EXPECT_THAT(launched_ids(), ElementsAre(std::nullopt));
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_jail_enabled 0"));
}

TEST_F(PoolJailTest, ACloneItsCgroupsOomKillerEndedIsReportedLostAsSuch) {
  // Exit status 5 is the jail supervisor's word for it (docs/jail.md).
  auto pool = jailed_pool(JailIdRange{}, "echo ready >&3; sleep 0.3; exit 5");
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  const auto sandbox = take(*pool);
  const std::string id = sandbox["id"];
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, id); }));
  EXPECT_THAT(pool->sandbox_json(kOperator, id).error().message,
              HasSubstr("lost: its VMM was killed by its cgroup's OOM killer"));
  EXPECT_EQ(pool->counters().oom_killed, 1U);
  EXPECT_EQ(pool->counters().lost, 1U);
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_oom_killed_total 1"));
}

// A clone's VMM has no supervisor to say so by its exit status: killed by SIGKILL, it is an
// OOM kill when its cgroup's memory.events counts one, and a plain loss otherwise.
TEST_F(PoolJailTest, AnUnsupervisedCloneKilledIsReportedOomKilledWhenItsCgroupSaysSo) {
  auto pool = jailed_pool(JailIdRange{}, "echo ready >&3; sleep 0.3; kill -9 $$");
  launcher_->set_oom_kills(true);
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  const std::string id = take(*pool)["id"];
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, id); }));
  EXPECT_THAT(pool->sandbox_json(kOperator, id).error().message,
              HasSubstr("lost: its VMM was killed by its cgroup's OOM killer"));
  EXPECT_EQ(pool->counters().oom_killed, 1U);
  EXPECT_EQ(pool->counters().lost, 1U);
}

TEST_F(PoolJailTest, AnUnsupervisedCloneKilledIsAPlainLossWhenItsCgroupCountsNoOomKill) {
  auto pool = jailed_pool(JailIdRange{}, "echo ready >&3; sleep 0.3; kill -9 $$");
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  const std::string id = take(*pool)["id"];
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, id); }));
  EXPECT_THAT(pool->sandbox_json(kOperator, id).error().message,
              HasSubstr("lost: its VMM killed by signal 9"));
  EXPECT_EQ(pool->counters().oom_killed, 0U);
  EXPECT_EQ(pool->counters().lost, 1U);
}

TEST_F(PoolJailTest, ARestartedPoolAdoptsTheIdOfACloneItFindsRunning) {
  // The clone's id is its directory's owner: chown needs root; elsewhere the directory is
  // ours, and our own uid stands in for a jail id.
  const uint32_t owner = ::geteuid() == 0 ? 400000 : ::geteuid();
  ASSERT_OK_AND_ASSIGN(auto state, StateDir::open(state_dir()));
  ASSERT_OK(state.write_images({image(0, 3)}));
  const SandboxFiles files = state.files_for("sb-live");
  ASSERT_TRUE(std::filesystem::create_directory(state.sandbox_dir("sb-live")));
  ASSERT_EQ(::chown(state.sandbox_dir("sb-live").c_str(), owner, owner), 0);
  ASSERT_OK_AND_ASSIGN(auto live, spawn_with_ready_pipe({"/bin/sh", "-c", kServes}, files.log));
  ASSERT_OK(state.write_record({.id = "sb-live",
                                .image = "base",
                                .process = live.identity,
                                .files = files,
                                .state = SandboxState::kInUse,
                                .expires_at_ms = 0}));
  // A directory no record names: a clone whose daemon died before its record.
  ASSERT_TRUE(std::filesystem::create_directory(state.sandbox_dir("sb-orphan")));

  auto pool = jailed_pool(JailIdRange{.first = owner, .last = owner + 1});
  pool->recover();
  ASSERT_TRUE(pool->sandbox_json(kOperator, "sb-live"));
  EXPECT_FALSE(std::filesystem::exists(state.sandbox_dir("sb-orphan")));
  take(*pool);
  EXPECT_THAT(launched_ids(), ElementsAre(owner + 1)) << "not the adopted clone's id";
  const auto full = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().kind, Failure::kFull);

  ASSERT_TRUE(pool->release(kOperator, "sb-live"));
  ASSERT_TRUE(run_until([&] { return !std::filesystem::exists(state.sandbox_dir("sb-live")); }));
  take(*pool);
  EXPECT_THAT(launched_ids(), ElementsAre(owner + 1, owner)) << "freed with its clone";
}

}  // namespace
}  // namespace dsec::pool

// The pool's bookkeeping over real child processes: a launcher that starts `sh` scripts
// instead of VMMs (they say "ready" on descriptor 3 and sleep, or fail), driven by a real
// event loop. What a client sees: states, counters, the errors' statuses and messages, and
// processes and files that are gone when they should be.
#include "vmm/pool/pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tests/support/fake_vsock_endpoint.h"
#include "tests/support/result_matchers.h"
#include "tests/support/stand_in_image.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/pool_test_fixture.h"
#include "vmm/io/event_loop.h"
#include "vmm/pool/host_memory.h"

namespace dsec::pool {
namespace {

using namespace test_fixture;

TEST_F(PoolTest, KeepsReadyClonesAndRefillsAfterAnAcquire) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(2, 3)));
  ASSERT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 2; }));

  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(acquired) << acquired.error().message;
  EXPECT_EQ((*acquired)["state"], "in_use");
  EXPECT_THAT((*acquired)["vsock"].get<std::string>(), HasSubstr(state_dir() + "/sandboxes/"));
  EXPECT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 2; }))
      << "the pool refills to 2 ready beside the one in use (max 3)";
  EXPECT_EQ(pool->count("base", SandboxState::kInUse), 1U);
  EXPECT_EQ(pool->counters().acquired, 1U);
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_sandboxes_ready{image=\"base\"} 2"));
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_restore_seconds_count 3"));
}

// A state file chooses the host files its VM opens: the pool refuses an image whose
// snapshot has drives (a caller's /dev/sda read-write), or a network device when it makes
// no clone networks, and one with no vsock device (no agent), before any clone of it starts.
TEST_F(PoolTest, AnImageWhoseSnapshotNamesHostFilesOrHasNoAgentIsRefused) {
  auto pool = make_pool(kServes);
  auto with = [&](const std::function<void(machine::MachineConfig&)>& change) {
    auto config = test::stand_in_config();
    change(config);
    EXPECT_TRUE(test::write_stand_in_image(image_dir(), 6, config));
    const auto registered = pool->register_image(image(1, 1));
    return registered ? std::string("(registered)") : registered.error().message;
  };
  EXPECT_THAT(with([](auto& c) {
                c.drives = {{.path = "/dev/sda", .read_only = false, .id = "disk"}};
              }),
              HasSubstr("its snapshot has 1 drive(s), which pool clones cannot have yet"));
  EXPECT_THAT(with([](auto& c) { c.nets = {machine::NetConfig{.tap = "tap0", .host_cidr = "", .mac = ""}}; }),
              HasSubstr("a network device, and this daemon makes no clone networks"));
  EXPECT_THAT(with([](auto& c) { c.vsock.reset(); }), HasSubstr("has no vsock device"));
  EXPECT_THAT(with([](auto&) {}), HasSubstr("(registered)"));
  std::ofstream(image_dir() + "/state") << "not a state file";
  const auto corrupt = pool->register_image(image(1, 1));
  ASSERT_FALSE(corrupt);
  EXPECT_EQ(corrupt.error().kind, Failure::kInvalid);
  EXPECT_THAT(corrupt.error().message, HasSubstr("snapshot state file"));
  EXPECT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 1; }))
      << "the image registered last (the good one) still serves";
}

TEST_F(PoolTest, AnEmptyPoolStartsOneOnTheSpotAndRefusesPastItsMax) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  auto first = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ((*first)["state"], "in_use");

  auto second = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().kind, Failure::kFull);
  EXPECT_THAT(second.error().message,
              HasSubstr("image base has its maximum of 1 clones (1 in use"));
  EXPECT_EQ(pool->counters().refused, 1U);

  auto unknown = acquire_now(*pool, {.image = "other", .ttl_s = std::nullopt});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, Failure::kNotFound);
  EXPECT_THAT(unknown.error().message, HasSubstr("no image 'other' is registered"));
}

// An acquire from an empty pool waits for a clone restored for it without holding the
// loop: acquires that come meanwhile each get a clone of their own, first come first served.
TEST_F(PoolTest, AcquiresFromAnEmptyPoolWaitWithoutHoldingThePool) {
  auto pool = make_pool("sleep 0.5; echo ready >&3; exec sleep 600");
  ASSERT_TRUE(pool->register_image(image(0, 2)));
  const auto first = start_acquire(*pool, {.image = "base", .ttl_s = std::nullopt});
  const auto second = start_acquire(*pool, {.image = "base", .ttl_s = std::nullopt});
  EXPECT_FALSE(first->has_value()) << "it waits on the loop, not in the call";
  EXPECT_EQ(pool->count("base", SandboxState::kStarting), 2U) << "one clone for each";
  const auto third = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().kind, Failure::kFull) << "past the image's max of 2";

  const auto a = wait_for(first);
  const auto b = wait_for(second);
  ASSERT_TRUE(a && b);
  EXPECT_NE((*a)["id"], (*b)["id"]);
  EXPECT_EQ(pool->count("base", SandboxState::kInUse), 2U);
}

TEST_F(PoolTest, HostMemoryPastTheRatioIsRefused) {
  auto pool = make_pool(kServes, PoolOptions{.max_memory_ratio = 0.0001});
  ASSERT_TRUE(pool->register_image(image(0, 4)));
  auto refused = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, Failure::kFull);
  EXPECT_THAT(refused.error().message, HasSubstr("past the pool's limit of 0%"));
}

// Clones share their image's pages until they write them: admission counts the guest
// memory each clone may yet write, not what the host has free now.
TEST_F(PoolTest, GuestMemoryCommittedPastTheLimitIsRefusedWhateverIsFreeNow) {
  const auto host = read_host_memory();
  ASSERT_TRUE(host) << host.error().message();
  // A 1 GiB memory file that holds nothing (sparse), and a limit of 2.5 GiB of guest memory.
  constexpr uint64_t kGuest = uint64_t{1} << 30;
  ASSERT_TRUE(test::write_stand_in_image(image_dir(), 0));
  std::filesystem::resize_file(image_dir() + "/memory", kGuest);
  const double overcommit = 2.5 * kGuest / (0.9 * static_cast<double>(host->total_bytes));
  auto pool = make_pool(kServes, PoolOptions{.max_memory_ratio = 0.9,
                                             .memory_overcommit = overcommit});
  ASSERT_TRUE(pool->register_image(image(0, 4)));
  ASSERT_TRUE(acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt}));
  ASSERT_TRUE(acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt}));
  auto third = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().kind, Failure::kFull);
  EXPECT_THAT(third.error().message,
              HasSubstr("the pool's clones may use 2048 MiB, and a clone of base 1024 MiB more, "
                        "past 2560 MiB"));
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_guest_memory_committed_bytes 2147483648\n"));
}

TEST_F(PoolTest, ReleaseStopsTheProcessAndRemovesItsFiles) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(0, 2)));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(acquired) << acquired.error().message;
  const std::string id = (*acquired)["id"];
  const pid_t pid = (*acquired)["pid"];
  EXPECT_TRUE(std::filesystem::exists(state_dir() + "/sandboxes/" + id + ".json"));

  ASSERT_TRUE(pool->release(kOperator, id));
  auto twice = pool->release(kOperator, id);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().kind, Failure::kGone);
  EXPECT_THAT(twice.error().message, HasSubstr("is gone: it was released"));
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, id); }));
  EXPECT_FALSE(process_exists(pid)) << "stopped and reaped";
  EXPECT_FALSE(std::filesystem::exists(state_dir() + "/sandboxes/" + id + ".json"));
  EXPECT_FALSE(std::filesystem::exists(state_dir() + "/sandboxes/" + id + ".log"));

  auto again = pool->release(kOperator, id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, Failure::kGone);
  EXPECT_THAT(again.error().message, HasSubstr("is gone: it was released"));
  auto exec = exec_now(*pool, id);
  ASSERT_FALSE(exec);
  EXPECT_EQ(exec.error().kind, Failure::kGone);
  auto unknown = pool->release(kOperator, "sb-nobody");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, Failure::kNotFound);
  EXPECT_EQ(pool->counters().released, 1U);
}

TEST_F(PoolTest, AReadyCloneIsNotReleasable) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(1, 1)));
  ASSERT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 1; }));
  const std::string id = pool->sandboxes_json(kOperator)["sandboxes"][0]["id"];
  auto released = pool->release(kOperator, id);
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().kind, Failure::kConflict);
  EXPECT_THAT(released.error().message, HasSubstr("is ready, not acquired"));
}

TEST_F(PoolTest, AKilledVmmIsReportedLostWithItsLogAndReplaced) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(1, 2)));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(acquired) << acquired.error().message;
  const std::string id = (*acquired)["id"];
  ASSERT_EQ(::kill((*acquired)["pid"].get<pid_t>(), SIGKILL), 0);

  ASSERT_TRUE(run_until([&] { return pool->counters().lost == 1; }));
  auto lost = pool->sandbox_json(kOperator, id);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().kind, Failure::kGone);
  EXPECT_THAT(lost.error().message, HasSubstr("lost: its VMM killed by signal 9"));
  EXPECT_THAT(lost.error().message, HasSubstr("vmm: clone serving"));
  EXPECT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 1; }))
      << "the pool refills";
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_lost_total 1"));
}

// A VMM that lives on but stops answering (a stuck loop, a hung guest) fails its health
// checks: after `health_failures` in a row it is reported lost, killed and replaced, while
// a sandbox that answers is left alone however many checks it sees.
TEST_F(PoolTest, AHungVmmIsReportedLostKilledAndReplaced) {
  test::FakeVsockEndpoint endpoint;
  auto pool = make_pool(
      std::make_unique<ServingLauncher>(endpoint, kServesAndLogsState),
      PoolOptions{.health_interval = 100ms, .health_timeout = 200ms, .health_failures = 2});
  ASSERT_TRUE(pool->register_image(image(1, 2)));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(acquired) << acquired.error().message;
  const std::string id = (*acquired)["id"];
  const auto pid = (*acquired)["pid"].get<pid_t>();
  ASSERT_TRUE(run_until([&] { return endpoint.lines().size() >= 6; }))
      << "every serving sandbox is checked each interval";
  EXPECT_THAT(endpoint.lines(), ::testing::Each(std::string("CONNECT 1024\n")));
  EXPECT_EQ(pool->counters().hung, 0U);
  EXPECT_TRUE(pool->sandbox_json(kOperator, id)) << "a sandbox that answers stays";

  endpoint.silence((*acquired)["vsock"].get<std::string>());
  ASSERT_TRUE(run_until([&] { return pool->counters().hung == 1; }));
  EXPECT_EQ(pool->counters().lost, 1U);
  // It shows `stopping` until its VMM ended.
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, id); }));
  auto lost = pool->sandbox_json(kOperator, id);
  EXPECT_EQ(lost.error().kind, Failure::kGone);
  EXPECT_THAT(lost.error().message,
              HasSubstr("lost: its VMM stopped answering (2 health checks in a row failed"));
  EXPECT_THAT(lost.error().message, HasSubstr("vmm: clone serving")) << "its log's last lines";
  EXPECT_THAT(lost.error().message, HasSubstr("vmm: vcpu 0 at rip"))
      << "what it logged on SIGUSR1, before it was killed";
  EXPECT_TRUE(run_until([&] { return !process_exists(pid); })) << "the hung VMM is killed";
  EXPECT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 1; }))
      << "the pool refills";
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_hung_total 1"));
}

// A hung VMM that SIGUSR1 ends (no handler) is reported lost with its log all the same.
TEST_F(PoolTest, AHungVmmThatSigusr1EndsIsReportedWithItsLog) {
  test::FakeVsockEndpoint endpoint;
  auto pool = make_pool(
      std::make_unique<ServingLauncher>(endpoint),
      PoolOptions{.health_interval = 100ms, .health_timeout = 200ms, .health_failures = 1});
  ASSERT_TRUE(pool->register_image(image(1, 2)));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(acquired) << acquired.error().message;
  const std::string id = (*acquired)["id"];
  endpoint.silence((*acquired)["vsock"].get<std::string>());
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, id); }));
  EXPECT_EQ(pool->sandbox_json(kOperator, id).error().kind, Failure::kGone);
  ASSERT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 1; }));
  const auto lost = pool->sandbox_json(kOperator, id);
  EXPECT_THAT(lost.error().message, HasSubstr("lost: its VMM stopped answering"));
  EXPECT_THAT(lost.error().message, HasSubstr("vmm: clone serving"));
  EXPECT_EQ(pool->counters().lost, 1U) << "one loss, though its VMM ended by itself";
}

// An exec waits on its sandbox's agent on a thread of its own: the pool answers other
// requests meanwhile, and an exec whose sandbox was released under it says so.
TEST_F(PoolTest, AnExecRunsWhileThePoolServesOthers) {
  test::FakeVsockEndpoint endpoint;
  std::unique_ptr<Pool> pool;
  const auto acquired = acquire_serving(pool, endpoint, 2);
  ASSERT_TRUE(acquired.contains("id"));
  const std::string id = acquired["id"];
  endpoint.silence(acquired["vsock"].get<std::string>());  // the agent never answers

  const auto exec = start_exec(*pool, id);
  EXPECT_FALSE(run_until([&] { return exec->has_value(); }, 300ms)) << "it waits on the agent";
  EXPECT_TRUE(pool->keepalive(kOperator, id));
  auto other = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  EXPECT_TRUE(other) << "another client is served meanwhile";
  ASSERT_TRUE(pool->release(kOperator, id));

  endpoint.close_held();
  ASSERT_TRUE(run_until([&] { return exec->has_value(); }));
  ASSERT_FALSE(exec->value());
  EXPECT_EQ(exec->value().error().kind, Failure::kGone);
  EXPECT_THAT(exec->value().error().message, HasSubstr("is gone: it was released"));
}

// Each exec, copy, pause, resume or snapshot runs on a thread of its own while it waits on
// a guest: one tenant may hold only so many at once, and all together only so many more.
TEST_F(PoolTest, RequestsInFlightAreCappedPerTenantAndInAll) {
  test::FakeVsockEndpoint endpoint;
  auto pool = make_pool(std::make_unique<ServingLauncher>(endpoint),
                        PoolOptions{.health_interval = 0ms,
                                    .max_requests_per_tenant = 2,
                                    .max_requests = 3});
  ASSERT_TRUE(pool->register_image(image(0, 2)));
  auto mine = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(mine) << mine.error().message;
  const Tenant other{.name = "uid:1000", .is_operator = false, .quota = {}};
  auto theirs_slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
  pool->acquire(other, {.image = "base", .ttl_s = std::nullopt},
                [theirs_slot](PoolResult<nlohmann::json> answer) { *theirs_slot = std::move(answer); });
  auto theirs = wait_for(theirs_slot);
  ASSERT_TRUE(theirs) << theirs.error().message;
  endpoint.silence((*mine)["vsock"].get<std::string>());  // no agent answers: execs wait
  endpoint.silence((*theirs)["vsock"].get<std::string>());
  const std::string my_id = (*mine)["id"];
  const std::string their_id = (*theirs)["id"];

  const auto first = start_exec(*pool, my_id);
  const auto second = start_exec(*pool, my_id);
  EXPECT_FALSE(run_until([&] { return first->has_value() || second->has_value(); }, 200ms));
  auto third = exec_now(*pool, my_id);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().kind, Failure::kQuota);
  EXPECT_THAT(third.error().message, HasSubstr("you run 2 requests"));

  const auto exec_as_other = [&] {
    auto slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
    ExecCall call;
    call.request.argv = {"true"};
    pool->exec(other, their_id, std::move(call),
               [slot](PoolResult<nlohmann::json> answer) { *slot = std::move(answer); });
    return slot;
  };
  const auto other_first = exec_as_other();
  EXPECT_FALSE(run_until([&] { return other_first->has_value(); }, 200ms))
      << "another tenant's first request runs beside mine";
  auto over_all = wait_for(exec_as_other());
  ASSERT_FALSE(over_all);
  EXPECT_EQ(over_all.error().kind, Failure::kFull);
  EXPECT_THAT(over_all.error().message, HasSubstr("the pool runs 3 requests"));

  endpoint.close_held();  // every waiting exec ends (502), and each frees its place
  ASSERT_TRUE(run_until(
      [&] { return first->has_value() && second->has_value() && other_first->has_value(); }));
  const auto again = start_exec(*pool, my_id);
  EXPECT_FALSE(run_until([&] { return again->has_value(); }, 200ms))
      << "a place freed: the next exec runs (and waits on the silent agent)";
  endpoint.close_held();
  ASSERT_TRUE(run_until([&] { return again->has_value(); }));
}

// An exec broken off because its VMM ended answers how the VMM ended, not only that the
// connection closed.
TEST_F(PoolTest, AnExecBrokenByItsVmmsEndSaysHowItEnded) {
  test::FakeVsockEndpoint endpoint;
  std::unique_ptr<Pool> pool;
  const auto acquired = acquire_serving(pool, endpoint, 1);
  ASSERT_TRUE(acquired.contains("id"));
  const std::string id = acquired["id"];
  endpoint.silence(acquired["vsock"].get<std::string>());
  const auto exec = start_exec(*pool, id);
  EXPECT_FALSE(run_until([&] { return exec->has_value(); }, 200ms));

  ASSERT_EQ(::kill(acquired["pid"].get<pid_t>(), SIGKILL), 0);
  std::this_thread::sleep_for(100ms);
  endpoint.close_held();  // the VMM's end closes its connections
  ASSERT_TRUE(run_until([&] { return exec->has_value(); }));
  ASSERT_FALSE(exec->value());
  EXPECT_EQ(exec->value().error().kind, Failure::kGone);
  EXPECT_THAT(exec->value().error().message, HasSubstr("lost: its VMM killed by signal 9"));
}

// An exec the agent breaks off is a 502 and leaves the sandbox in use; while one runs, the
// idle timeout does not count (the client waits on its answer), and it counts from its end.
TEST_F(PoolTest, AnExecHoldsOffTheIdleTimeoutAndABrokenOneIsA502) {
  test::FakeVsockEndpoint endpoint;
  std::unique_ptr<Pool> pool;
  const auto acquired = acquire_serving(pool, endpoint, 1, 1);
  ASSERT_TRUE(acquired.contains("id"));
  const std::string id = acquired["id"];

  auto broken = exec_now(*pool, id);  // the endpoint says OK, then closes
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().kind, Failure::kAgentFailed);
  EXPECT_THAT(broken.error().message, HasSubstr("exec in sandbox " + id + " failed"));

  endpoint.silence(acquired["vsock"].get<std::string>());
  const auto exec = start_exec(*pool, id);
  EXPECT_FALSE(run_until([&] { return exec->has_value(); }, 2500ms));
  EXPECT_EQ(pool->counters().idle_stopped, 0U) << "no idle end while an exec runs";
  endpoint.close_held();
  ASSERT_TRUE(run_until([&] { return exec->has_value(); }));
  EXPECT_EQ(pool->count("base", SandboxState::kInUse), 1U);
  EXPECT_TRUE(run_until([&] { return pool->counters().idle_stopped == 1; }))
      << "the idle timeout counts from the exec's end";
}

// Exec and files through the pool reach the sandbox's agent: here the agent's own session
// code, serving on the host behind a fake vsock socket.
TEST_F(PoolTest, ExecAndFilesGoThroughTheSandboxesAgent) {
  test::FakeVsockEndpoint endpoint(test::FakeVsockEndpoint::After::kServeAgent);
  std::unique_ptr<Pool> pool;
  const auto acquired = acquire_serving(pool, endpoint, 1);
  ASSERT_TRUE(acquired.contains("id"));
  const std::string id = acquired["id"];

  auto ran = exec_now(*pool, id);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ((*ran)["stdout"], "hi\n");

  const std::string guest_path = dir_.file("in-the-guest.bin");
  const std::string bytes("binary\0bytes\n", 13);
  std::optional<PoolResult<void>> written;
  pool->write_file(kOperator, id, guest_path, GuestFile{.bytes = bytes, .mode = 0640},
                   [&](PoolResult<void> done) { written = std::move(done); });
  ASSERT_TRUE(run_until([&] { return written.has_value(); }));
  ASSERT_TRUE(written->has_value()) << written->error().message;
  EXPECT_EQ(std::filesystem::file_size(guest_path), bytes.size());
  EXPECT_EQ(std::filesystem::status(guest_path).permissions(), std::filesystem::perms(0640));

  std::optional<PoolResult<GuestFile>> read;
  pool->read_file(kOperator, id, guest_path,
                  [&](PoolResult<GuestFile> file) { read = std::move(file); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  ASSERT_TRUE(read->has_value()) << read->error().message;
  EXPECT_EQ(read->value().bytes, bytes);
  EXPECT_EQ(read->value().mode, 0640U);

  read.reset();
  pool->read_file(kOperator, id, dir_.file("missing"),
                  [&](PoolResult<GuestFile> file) { read = std::move(file); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  ASSERT_FALSE(read->has_value());
  EXPECT_EQ(read->error().kind, Failure::kAgentFailed);
  EXPECT_THAT(read->error().message, HasSubstr("copy out of sandbox " + id + " failed"));
}

TEST_F(PoolTest, TimeToLiveStopsTheSandbox) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(0, 1, /*ttl_s=*/60)));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = 1});
  ASSERT_TRUE(acquired) << acquired.error().message;
  const std::string id = (*acquired)["id"];
  EXPECT_LE((*acquired)["expires_in_ms"].get<int64_t>(), 1000) << "the request's ttl wins";
  ASSERT_TRUE(run_until(
      [&] { return pool->counters().expired == 1 && !pool->sandbox_json(kOperator, id); }));
  EXPECT_THAT(pool->sandbox_json(kOperator, id).error().message,
              HasSubstr("reached its time to live"));
  EXPECT_FALSE(process_exists((*acquired)["pid"].get<pid_t>()));
}

// A client that keeps naming its sandbox keeps it past the idle timeout; one that stops is
// taken to have gone away, and the sandbox is stopped.
TEST_F(PoolTest, AnIdleTimeoutStopsASandboxOnlyOnceItsClientStopsAsking) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  auto acquired = acquire_now(*pool, {.image = "base", .idle_timeout_s = 2});
  ASSERT_TRUE(acquired) << acquired.error().message;
  const std::string id = (*acquired)["id"];
  EXPECT_EQ((*acquired)["idle_timeout_ms"], 2000);

  // 3 s of requests, each well within the timeout: GET and keepalive renew it.
  const auto renewing_until = std::chrono::steady_clock::now() + 3000ms;
  bool get = false;
  auto last_request = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < renewing_until) {
    ASSERT_TRUE(get ? pool->sandbox_json(kOperator, id).has_value()
                    : pool->keepalive(kOperator, id).has_value());
    last_request = std::chrono::steady_clock::now();
    get = !get;
    const auto next = std::chrono::steady_clock::now() + 200ms;
    ASSERT_TRUE(run_until([&] { return std::chrono::steady_clock::now() >= next; }));
  }
  EXPECT_EQ(pool->counters().idle_stopped, 0U);
  EXPECT_EQ(pool->count("base", SandboxState::kInUse), 1U);

  // Then silence: stopped 2 s after the last request, and the client is told why.
  ASSERT_TRUE(run_until([&] { return pool->counters().idle_stopped == 1; }));
  EXPECT_GE(std::chrono::steady_clock::now() - last_request, 2000ms);
  const auto gone = pool->keepalive(kOperator, id);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, Failure::kGone);
  EXPECT_THAT(gone.error().message, HasSubstr("its idle timeout"));
  ASSERT_TRUE(run_until([&] { return !process_exists((*acquired)["pid"].get<pid_t>()); }));
  EXPECT_THAT(pool->metrics(), HasSubstr("dsec_pool_idle_stopped_total 1"));
  EXPECT_EQ(pool->counters().expired, 0U);
}

// The image's idle timeout is the default; a time to live that comes first still wins.
TEST_F(PoolTest, TheImagesIdleTimeoutAppliesAndAnEarlierTimeToLiveWins) {
  auto pool = make_pool(kServes);
  ImageSpec spec = image(0, 2);
  spec.idle_timeout_s = 60;
  ASSERT_TRUE(pool->register_image(spec));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = 1});
  ASSERT_TRUE(acquired) << acquired.error().message;
  EXPECT_EQ((*acquired)["idle_timeout_ms"], 60000);
  ASSERT_TRUE(run_until([&] { return pool->counters().expired == 1; }));
  EXPECT_EQ(pool->counters().idle_stopped, 0U);
}

TEST_F(PoolTest, AVmmThatFailsToStartCountsARefillError) {
  auto pool = make_pool("echo 'dsec-vmm restore: no KVM here' >&2; exit 3");
  ASSERT_TRUE(pool->register_image(image(0, 1)));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_FALSE(acquired);
  EXPECT_EQ(acquired.error().kind, Failure::kUnavailable);
  EXPECT_GE(pool->counters().refill_errors, 1U);
  EXPECT_EQ(pool->count("base", SandboxState::kStarting), 0U);
  EXPECT_TRUE(std::filesystem::is_empty(state_dir() + "/sandboxes"));
}

// A VMM that writes something other than the ready line is stopped, and its end refills
// only after the back-off: one that always does would otherwise be started again and
// again as fast as processes start.
TEST_F(PoolTest, AVmmThatSpeaksNoReadyLineIsStartedAgainOnlyAfterTheBackOff) {
  refill_backoff_ = 1s;
  auto launcher = std::make_unique<ShellLauncher>("echo garbage >&3; exec sleep 60");
  const ShellLauncher& launched = *launcher;
  auto pool = make_pool(std::move(launcher), PoolOptions{.health_interval = 0ms});
  ASSERT_TRUE(pool->register_image(image(1, 1)));
  ASSERT_TRUE(run_until([&] { return pool->counters().refill_errors >= 1; }));
  run_until([] { return false; }, 1500ms);
  EXPECT_LE(launched.launched().size(), 3U) << "started again without the back-off";
  EXPECT_GE(launched.launched().size(), 2U) << "never started again";
}

// A warm acquire is answered before the refill's launch (tens of ms in the test bed): the
// acquire returns with no clone launched, and the loop launches it on its next turn.
TEST_F(PoolTest, AWarmAcquireLeavesItsRefillToTheLoopsNextTurn) {
  auto launcher = std::make_unique<ShellLauncher>(kServes);
  const ShellLauncher& launches = *launcher;
  auto pool = make_pool(std::move(launcher), PoolOptions{.health_interval = 0ms});
  ASSERT_TRUE(pool->register_image(image(1, 2)));
  ASSERT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 1; }));
  const size_t before = launches.launched().size();
  const Slot slot = start_acquire(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(slot->has_value()) << "a ready clone is handed over at once";
  EXPECT_EQ(launches.launched().size(), before) << "the refill launched before the answer";
  EXPECT_TRUE(run_until([&] { return launches.launched().size() == before + 1; }));
}

TEST_F(PoolTest, ShutdownStopsEveryProcessAndLeavesNoFile) {
  auto pool = make_pool(kServes);
  ASSERT_TRUE(pool->register_image(image(2, 3)));
  ASSERT_TRUE(run_until([&] { return pool->count("base", SandboxState::kReady) == 2; }));
  auto acquired = acquire_now(*pool, {.image = "base", .ttl_s = std::nullopt});
  ASSERT_TRUE(acquired) << acquired.error().message;
  std::vector<pid_t> pids;
  const auto listed = pool->sandboxes_json(kOperator);  // the loop must not outlive it
  for (const auto& s : listed["sandboxes"]) {
    pids.push_back(s["pid"]);
  }
  pool->shutdown();
  for (const pid_t pid : pids) {
    EXPECT_FALSE(process_exists(pid)) << pid;
  }
  EXPECT_TRUE(std::filesystem::is_empty(state_dir())) << "no record, log, socket or images.json";
}

TEST_F(PoolTest, ARestartedPoolAdoptsLiveSandboxesAndCleansDeadOnes) {
  ASSERT_OK_AND_ASSIGN(auto state, StateDir::open(state_dir()));
  ASSERT_OK(state.write_images({image(0, 2)}));
  // A sandbox in use whose VMM lives on after its daemon ended...
  const SandboxFiles live_files = state.files_for("sb-live");
  ASSERT_OK_AND_ASSIGN(auto live,
                       spawn_with_ready_pipe({"/bin/sh", "-c", kServes}, live_files.log));
  ASSERT_OK(state.write_record({.id = "sb-live",
                                .image = "base",
                                .process = live.identity,
                                .files = live_files,
                                .state = SandboxState::kInUse,
                                .expires_at_ms = 0}));
  // ...and one whose VMM died meanwhile (its pid's start time is not the record's).
  const SandboxFiles dead_files = state.files_for("sb-dead");
  std::ofstream(dead_files.log) << "vmm: last words\n";
  ASSERT_OK(state.write_record({.id = "sb-dead",
                                .image = "base",
                                .process = {.pid = live.identity.pid, .start_time = 1},
                                .files = dead_files,
                                .state = SandboxState::kReady,
                                .expires_at_ms = 0}));

  auto pool = make_pool(kServes);
  pool->recover();
  auto adopted = pool->sandbox_json(kOperator, "sb-live");
  ASSERT_TRUE(adopted) << adopted.error().message;
  EXPECT_EQ((*adopted)["state"], "in_use");
  EXPECT_TRUE(process_exists(live.identity.pid)) << "a sandbox a client holds is not stopped";
  EXPECT_EQ(pool->counters().lost, 1U);
  EXPECT_THAT(pool->sandbox_json(kOperator, "sb-dead").error().message,
              HasSubstr("vmm: last words"));
  EXPECT_FALSE(std::filesystem::exists(dead_files.log));
  EXPECT_FALSE(std::filesystem::exists(state_dir() + "/sandboxes/sb-dead.json"));

  ASSERT_TRUE(pool->release(kOperator, "sb-live"));
  ASSERT_TRUE(run_until([&] { return !pool->sandbox_json(kOperator, "sb-live"); }));
  EXPECT_FALSE(process_exists(live.identity.pid));
}

}  // namespace
}  // namespace dsec::pool

// The pool's test fixture: a launcher that starts `sh` scripts instead of VMMs (they say
// "ready" on descriptor 3 and sleep, or fail), ones that also serve a fake vsock endpoint,
// and a real event loop to drive the pool with.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/support/fake_vsock_endpoint.h"
#include "tests/support/stand_in_image.h"
#include "tests/support/temp_dir.h"
#include "vmm/io/event_loop.h"
#include "vmm/pool/pool.h"

namespace dsec::pool::test_fixture {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A "VMM" that logs a line, says it is ready, and sleeps until it is stopped.
constexpr const char* kServes = "echo 'vmm: clone serving' >&2; echo ready >&3; exec sleep 600";
// One that, as dsec-vmm does, logs its state on SIGUSR1 and lives on.
constexpr const char* kServesAndLogsState =
    "trap \"echo 'vmm: vcpu 0 at rip 0xffffffff81000000' >&2\" USR1; "
    "echo 'vmm: clone serving' >&2; echo ready >&3; while :; do sleep 1 & wait $!; done";

class ShellLauncher final : public VmmLauncher {
 public:
  explicit ShellLauncher(std::string script) : script_(std::move(script)) {}
  Result<LaunchedVmm> launch(const CloneLaunch& clone) override {
    launched_.push_back(clone);
    return spawn_with_ready_pipe({"/bin/sh", "-c", script_}, clone.files.log);
  }
  // Every clone launched, in order.
  const std::vector<CloneLaunch>& launched() const { return launched_; }
  // What its cgroup's memory.events would say of every clone once it ended.
  bool oom_killed(const std::string& /*sandbox_dir*/) override { return oom_kills_; }
  void set_oom_kills(bool oom_kills) { oom_kills_ = oom_kills; }

 private:
  std::string script_;
  std::vector<CloneLaunch> launched_;
  bool oom_kills_ = false;
};

// A launcher whose "VMMs" serve: each also has its vsock socket answered by `endpoint`.
class ServingLauncher final : public VmmLauncher {
 public:
  explicit ServingLauncher(test::FakeVsockEndpoint& endpoint, std::string script = kServes)
      : endpoint_(endpoint), script_(std::move(script)) {}
  Result<LaunchedVmm> launch(const CloneLaunch& clone) override {
    if (!endpoint_.listen(clone.files.vsock)) {
      return fail("cannot bind " + clone.files.vsock);
    }
    return spawn_with_ready_pipe({"/bin/sh", "-c", script_}, clone.files.log);
  }

 private:
  test::FakeVsockEndpoint& endpoint_;
  std::string script_;
};

// The daemon's own user: the tenant every request of these tests comes from.
inline const Tenant kOperator{.name = "uid:0", .is_operator = true, .quota = {}};

inline bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A warm image in the pool's image store as the pool checks it: its two files (nothing
    // restores them here), the daemon's and writable by nobody else.
    ASSERT_TRUE(write_store_image("base", 6));
    auto loop = io::EventLoop::create();
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::make_unique<io::EventLoop>(std::move(*loop));
  }

  // Health checks off: these "VMMs" have no vsock socket to answer them.
  std::unique_ptr<Pool> make_pool(const std::string& script, PoolOptions options = {}) {
    options.health_interval = 0ms;
    return make_pool(std::make_unique<ShellLauncher>(script), options);
  }
  std::unique_ptr<Pool> make_pool(std::unique_ptr<VmmLauncher> launcher, PoolOptions options) {
    auto state = StateDir::open(state_dir());
    EXPECT_TRUE(state) << state.error().message();
    auto store = ImageStore::open(store_dir(), store_limits_);
    EXPECT_TRUE(store) << store.error().message();
    options.stop_grace = 2s;
    options.refill_backoff = refill_backoff_;
    options.ready_timeout = 20s;
    return std::make_unique<Pool>(*loop_, std::move(*state), std::move(*store), std::move(launcher),
                                  options);
  }

  ImageSpec image(uint32_t ready, uint32_t max, uint64_t ttl_s = 0) {
    return {.name = "base", .ready = ready, .max = max, .ttl_s = ttl_s};
  }

  // The pool's image store, and a stand-in image `name` in it of `memory_bytes`, its
  // directory 0700 and its files 0600.
  std::string store_dir() const { return dir_.file("images"); }
  std::string image_dir() const { return store_dir() + "/base"; }
  bool write_store_image(const std::string& name, size_t memory_bytes) {
    return !test::write_store_image(store_dir(), name, memory_bytes).empty();
  }

  // Runs the loop until `done` or `within` passed.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds within = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      if (auto ran = loop_->run_once(50ms); !ran) {
        ADD_FAILURE() << ran.error().message();
        return false;
      }
    }
    return true;
  }

  std::string state_dir() const { return dir_.file("state"); }
  ImageStoreLimits store_limits_;
  std::chrono::milliseconds refill_backoff_ = 50ms;  // make_pool's

  using Slot = std::shared_ptr<std::optional<PoolResult<nlohmann::json>>>;
  // Starts an acquire; its answer lands in the returned slot.
  Slot start_acquire(Pool& pool, const AcquireRequest& request) {
    auto slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
    pool.acquire(kOperator, request,
                 [slot](PoolResult<nlohmann::json> answer) { *slot = std::move(answer); });
    return slot;
  }
  // An acquire's answer, the loop run until it came.
  PoolResult<nlohmann::json> acquire_now(Pool& pool, const AcquireRequest& request) {
    return wait_for(start_acquire(pool, request));
  }
  PoolResult<nlohmann::json> wait_for(const Slot& slot) {
    EXPECT_TRUE(run_until([&] { return slot->has_value(); }));
    return slot->value_or(
        std::unexpected(PoolError{.kind = Failure::kUnavailable, .message = "no answer"}));
  }

  // A pool whose "VMMs" serve through `endpoint` (no health checks) with image(0, max), and
  // one sandbox acquired from it (`idle_timeout_s` its lease's): the sandbox.
  nlohmann::json acquire_serving(std::unique_ptr<Pool>& pool, test::FakeVsockEndpoint& endpoint,
                                 uint32_t max, std::optional<uint64_t> idle_timeout_s = {}) {
    pool =
        make_pool(std::make_unique<ServingLauncher>(endpoint), PoolOptions{.health_interval = 0ms});
    EXPECT_TRUE(pool->register_image(image(0, max)));
    auto acquired = acquire_now(
        *pool, {.image = "base", .ttl_s = std::nullopt, .idle_timeout_s = idle_timeout_s});
    EXPECT_TRUE(acquired) << acquired.error().message;
    return acquired.value_or(nlohmann::json::object());
  }

  // Starts an exec of `echo hi`; its answer lands in the returned slot.
  Slot start_exec(Pool& pool, const std::string& id) {
    auto slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
    ExecCall call;
    call.request.argv = {"echo", "hi"};
    pool.exec(kOperator, id, std::move(call),
              [slot](PoolResult<nlohmann::json> answer) { *slot = std::move(answer); });
    return slot;
  }
  // An exec's answer, the loop run until it came.
  PoolResult<nlohmann::json> exec_now(Pool& pool, const std::string& id) {
    return wait_for(start_exec(pool, id));
  }

  test::TempDir dir_;
  std::unique_ptr<io::EventLoop> loop_;
};

}  // namespace dsec::pool::test_fixture

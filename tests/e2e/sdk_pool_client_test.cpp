// The library's PoolClient on a real pool in the test bed: register the shared warm image,
// acquire a sandbox, run `echo` in it through the SandboxClient on its vsock socket, renew
// its lease, release it, and see its id answer 410 with why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "dsec/pool.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"

namespace dsec::sdk {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::filesystem::path local_base() {
  return ::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path();
}

TEST(SdkPool, AcquireExecThroughItsVsockAndRelease) {
  // The pool tests' image: one warm image per test-bed session.
  const auto& image = test::shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  test::TempDir dir(local_base());
  // Restores in the emulated test bed take seconds each.
  test::PoolDaemon daemon(dir.path(), {"--ready-timeout", "280"});
  ASSERT_TRUE(daemon.serving(60s)) << daemon.log();
  const PoolClient pool(daemon.socket(), {.request_timeout = 300s});

  ASSERT_FALSE(test::link_into_store(image, daemon.image_dir(), "base").empty());
  const auto registered = pool.register_image({.name = "base", .ready = 0, .max = 1});
  ASSERT_TRUE(registered) << registered.error().to_string();
  const auto sandbox = pool.acquire({.image = "base", .ttl = 600s, .idle_timeout = 300s});
  ASSERT_TRUE(sandbox) << sandbox.error().to_string() << "\n" << daemon.log();
  EXPECT_EQ(sandbox->state, PoolSandboxState::kInUse);
  EXPECT_EQ(sandbox->image, "base");
  ASSERT_TRUE(sandbox->expires_in);
  EXPECT_GT(*sandbox->expires_in, 500s);
  EXPECT_EQ(sandbox->idle_timeout, std::chrono::milliseconds(300s));

  ExecRequest echo;
  echo.argv = {"echo", "from the pool"};
  echo.timeout = 60s;
  const auto echoed = sandbox->client().exec(echo);
  ASSERT_TRUE(echoed) << echoed.error().to_string();
  EXPECT_TRUE(echoed->status.success());
  EXPECT_EQ(echoed->stdout_data, "from the pool\n");

  ASSERT_TRUE(pool.keepalive(sandbox->id));
  const auto paused = pool.pause(sandbox->id);
  ASSERT_TRUE(paused) << paused.error().to_string();
  EXPECT_TRUE(paused->paused);
  const auto resumed = pool.resume(sandbox->id);
  ASSERT_TRUE(resumed) << resumed.error().to_string();
  EXPECT_FALSE(resumed->paused);
  const auto listed = pool.sandboxes();
  ASSERT_TRUE(listed) << listed.error().to_string();
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ(listed->front().id, sandbox->id);
  const auto images = pool.images();
  ASSERT_TRUE(images) << images.error().to_string();
  ASSERT_EQ(images->size(), 1U);
  EXPECT_EQ(images->front().in_use, 1U);

  ASSERT_TRUE(pool.release(sandbox->id));
  // Released, it shows as stopping until its VMM has exited, then it is gone (410).
  auto gone = pool.sandbox(sandbox->id);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (gone && std::chrono::steady_clock::now() < deadline) {
    EXPECT_EQ(gone->state, PoolSandboxState::kStopping);
    std::this_thread::sleep_for(100ms);
    gone = pool.sandbox(sandbox->id);
  }
  ASSERT_FALSE(gone) << "still listed 60 s after its release";
  EXPECT_EQ(gone.error().http_status(), 410);
  EXPECT_THAT(gone.error().message(), HasSubstr("it was released"));
  const auto again = pool.release(sandbox->id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().http_status(), 410);
}

}  // namespace
}  // namespace dsec::sdk

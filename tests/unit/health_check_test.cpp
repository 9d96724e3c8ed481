// The pool's health check against real Unix sockets on a real event loop: a socket that
// answers as a serving VMM does, one that holds the connection silent (a stuck VMM), one
// that closes it (a guest that refused the port), and none at all.
#include "vmm/pool/health_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <thread>

#include "tests/support/fake_vsock_endpoint.h"
#include "tests/support/temp_dir.h"

namespace dsec::pool {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class HealthCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = io::EventLoop::create();
    ASSERT_TRUE(loop) << loop.error().message();
    loop_ = std::make_unique<io::EventLoop>(std::move(*loop));
  }

  // Runs a check of `path` to its verdict (within 10 s).
  HealthVerdict check(const std::string& path, std::chrono::milliseconds timeout) {
    std::optional<HealthVerdict> verdict;
    auto check = HealthCheck::start(*loop_, path, 1024, timeout,
                                    [&](HealthVerdict v) { verdict = std::move(v); });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!verdict && std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(loop_->run_once(20ms));
    }
    EXPECT_TRUE(verdict) << "no verdict within 10 s";
    return verdict.value_or(HealthVerdict{});
  }

  test::TempDir dir_;
  std::unique_ptr<io::EventLoop> loop_;
};

TEST_F(HealthCheckTest, AServingVmmAnswersOkToTheAgentsPort) {
  test::FakeVsockEndpoint vmm;
  ASSERT_TRUE(vmm.listen(dir_.file("v.sock")));
  const auto verdict = check(dir_.file("v.sock"), 5s);
  EXPECT_EQ(verdict.health, Health::kAnswered) << verdict.why;
  EXPECT_THAT(vmm.lines(), ::testing::ElementsAre("CONNECT 1024\n"));
}

TEST_F(HealthCheckTest, AVmmThatHoldsTheConnectionSilentFailsAtTheTimeout) {
  test::FakeVsockEndpoint vmm;
  ASSERT_TRUE(vmm.listen(dir_.file("v.sock")));
  vmm.silence(dir_.file("v.sock"));
  const auto start = std::chrono::steady_clock::now();
  const auto verdict = check(dir_.file("v.sock"), 300ms);
  EXPECT_EQ(verdict.health, Health::kSilent);
  EXPECT_THAT(verdict.why, HasSubstr("no answer within"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST_F(HealthCheckTest, AClosedConnectionOrAMissingSocketIsARefusal) {
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = dir_.file("closing.sock");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  std::thread closer([&] { UniqueFd conn(::accept(listener.get(), nullptr, nullptr)); });
  const auto closed = check(path, 5s);
  closer.join();
  EXPECT_EQ(closed.health, Health::kRefused);
  EXPECT_THAT(closed.why, HasSubstr("closed the connection without an answer"));

  const auto missing = check(dir_.file("none.sock"), 5s);
  EXPECT_EQ(missing.health, Health::kRefused);
  EXPECT_THAT(missing.why, HasSubstr("No such file"));
}

// A daemon busy with a request does not turn the loop while the answer arrives: the
// answer that waits in the socket when the deadline fires still counts.
TEST_F(HealthCheckTest, AnAnswerThatCameWhileTheLoopWasHeldCounts) {
  test::FakeVsockEndpoint vmm;
  ASSERT_TRUE(vmm.listen(dir_.file("v.sock")));
  std::optional<HealthVerdict> verdict;
  auto running = HealthCheck::start(*loop_, dir_.file("v.sock"), 1024, 100ms,
                                    [&](HealthVerdict v) { verdict = std::move(v); });
  std::this_thread::sleep_for(300ms);  // the answer came; the deadline passed
  for (int i = 0; i < 50 && !verdict; ++i) {
    ASSERT_TRUE(loop_->run_once(20ms));
  }
  ASSERT_TRUE(verdict.has_value());
  const HealthVerdict answered = verdict.value_or(HealthVerdict{});
  EXPECT_EQ(answered.health, Health::kAnswered) << answered.why;
}

TEST_F(HealthCheckTest, ACheckDestroyedInFlightNeverCallsBack) {
  test::FakeVsockEndpoint vmm;
  ASSERT_TRUE(vmm.listen(dir_.file("v.sock")));
  vmm.silence(dir_.file("v.sock"));
  bool called = false;
  auto running = HealthCheck::start(*loop_, dir_.file("v.sock"), 1024, 50ms,
                                    [&](const HealthVerdict&) { called = true; });
  ASSERT_TRUE(loop_->run_once(10ms));
  running.reset();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(loop_->run_once(20ms));
  }
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace dsec::pool

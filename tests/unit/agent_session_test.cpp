// The guest agent's request handling (guest/agent/session.cpp) against the host client
// (vmm/agent/client.cpp), over socketpairs: both real sides of the protocol, no VM.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "guest/agent/session.h"
#include "vmm/agent/client.h"

namespace dsec::agent {
namespace {

class AgentSession : public ::testing::Test {
 protected:
  AgentSession()
      : client_([this]() -> Result<UniqueFd> {
          int sv[2];
          if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            return fail_errno("socketpair", errno);
          }
          std::lock_guard lock(mutex_);
          servers_.emplace_back([fd = sv[1]] {
            serve_connection(fd);
            ::close(fd);
          });
          return UniqueFd(sv[0]);
        }) {
    dir_ = std::filesystem::temp_directory_path() /
           ("agent-session-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  ~AgentSession() override {
    join_servers();
    std::filesystem::remove_all(dir_);
  }

  // Waits until the agent has served every connection so far to its end, clean-up after a
  // failed request included: a client's error can come back before the agent has even
  // begun (or finished) what the request made it do.
  void join_servers() {
    const std::lock_guard lock(mutex_);
    for (auto& t : servers_) {
      if (t.joinable()) t.join();
    }
  }

  struct Output {
    std::string out, err;
    Result<ExitStatus> status;
  };
  Output run(ExecRequest req, std::string_view stdin_data = {}) {
    Output o{{}, {}, ExitStatus{}};
    o.status = client_.exec(
        req,
        [&](std::span<const uint8_t> b) {
          o.out.append(b.begin(), b.end());
          return ok();
        },
        [&](std::span<const uint8_t> b) {
          o.err.append(b.begin(), b.end());
          return ok();
        },
        std::span(reinterpret_cast<const uint8_t*>(stdin_data.data()), stdin_data.size()));
    return o;
  }

  std::mutex mutex_;
  std::vector<std::thread> servers_;
  AgentClient client_;
  std::filesystem::path dir_;
};

TEST_F(AgentSession, HealthNamesTheAgent) {
  auto h = client_.health();
  ASSERT_TRUE(h.has_value()) << h.error().message();
  EXPECT_EQ(h->agent_version, kAgentVersion);
  EXPECT_GT(h->uptime_ms, 0U);
}

TEST_F(AgentSession, ExecStreamsStdoutAndStderrApartAndReturnsTheExitCode) {
  auto o = run({{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, {}, "", 0, false});
  ASSERT_TRUE(o.status.has_value()) << o.status.error().message();
  EXPECT_EQ(o.out, "out\n");
  EXPECT_EQ(o.err, "err\n");
  EXPECT_EQ(*o.status, (ExitStatus{ExitStatus::Kind::kExited, 3}));
}

TEST_F(AgentSession, TenMibOfOutputArriveByteForByte) {
  auto o = run({{"/bin/sh", "-c", "seq 1 1500000"}, {}, "", 0, false});
  ASSERT_TRUE(o.status.has_value()) << o.status.error().message();
  std::string want;
  for (int i = 1; i <= 1500000; ++i) want += std::to_string(i) + "\n";
  ASSERT_GE(want.size(), 10U << 20);
  EXPECT_EQ(o.out.size(), want.size());
  EXPECT_TRUE(o.out == want);
}

TEST_F(AgentSession, ATimeoutKillsTheWholeProcessGroupAndSaysSo) {
  const auto t0 = std::chrono::steady_clock::now();
  auto o = run({{"/bin/sh", "-c", "sleep 30 & sleep 30"}, {}, "", 300, false});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(o.status.has_value()) << o.status.error().message();
  EXPECT_EQ(o.status->kind, ExitStatus::Kind::kTimedOut);
  EXPECT_EQ(o.status->code, 9);
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(AgentSession, OutputHeldOpenByABackgroundProcessDoesNotHoldTheExitBack) {
  // The shell exits at once; the sleep it leaves behind keeps stdout open. The agent
  // drains briefly after the exit, then answers with the shell's status.
  const auto t0 = std::chrono::steady_clock::now();
  auto o = run({{"/bin/sh", "-c", "echo started; sleep 20 & exit 4"}, {}, "", 0, false});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(o.status.has_value()) << o.status.error().message();
  EXPECT_EQ(o.out, "started\n");
  EXPECT_EQ(*o.status, (ExitStatus{ExitStatus::Kind::kExited, 4}));
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(AgentSession, ASignalIsReportedAsASignal) {
  auto o = run({{"/bin/sh", "-c", "kill -TERM $$"}, {}, "", 0, false});
  ASSERT_TRUE(o.status.has_value()) << o.status.error().message();
  EXPECT_EQ(*o.status, (ExitStatus{ExitStatus::Kind::kSignaled, 15}));
}

TEST_F(AgentSession, AMissingProgramIsAnErrorNamingIt) {
  auto o = run({{"/no/such/program"}, {}, "", 0, false});
  ASSERT_FALSE(o.status.has_value());
  EXPECT_NE(o.status.error().message().find("cannot run '/no/such/program'"), std::string::npos)
      << o.status.error().message();
}

TEST_F(AgentSession, StdinCwdAndEnvironmentReachTheCommand) {
  auto o = run({{"/bin/sh", "-c", "pwd; echo \"$FOO\"; cat"}, {"FOO=bar baz"}, "/tmp", 0, true},
               "from the host");
  ASSERT_TRUE(o.status.has_value()) << o.status.error().message();
  EXPECT_EQ(o.out, "/tmp\nbar baz\nfrom the host");
  EXPECT_EQ(o.status->code, 0);
}

TEST_F(AgentSession, TenMibFileGoesInAndComesBackWithItsMode) {
  std::vector<uint8_t> data(10 << 20);
  std::mt19937_64 rng(42);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const auto src = dir_ / "src";
  std::ofstream(src, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  const UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  const auto guest_path = (dir_ / "copied").string();
  auto w = client_.write_file(in.get(), data.size(), guest_path, 0750);
  ASSERT_TRUE(w.has_value()) << w.error().message();

  std::vector<uint8_t> back;
  auto info = client_.read_file(guest_path, [&](std::span<const uint8_t> b) {
    back.insert(back.end(), b.begin(), b.end());
    return ok();
  });
  ASSERT_TRUE(info.has_value()) << info.error().message();
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(info->mode, 0750U);
  EXPECT_TRUE(back == data);
}

TEST_F(AgentSession, FileErrorsComeBackAsMessagesAndLeaveNothingBehind) {
  auto r = client_.read_file((dir_ / "missing").string(), [](auto) { return ok(); });
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("cannot open"), std::string::npos) << r.error().message();

  // A source that ends early: the client says so and the guest keeps no partial file.
  const auto src = dir_ / "short";
  std::ofstream(src) << "12345";
  const UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  auto w = client_.write_file(in.get(), 10, (dir_ / "target").string(), 0644);
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.error().message().find("ended after 5 of 10"), std::string::npos)
      << w.error().message();
  join_servers();
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"short"});

  auto bad_dir = client_.write_file(in.get(), 0, "/no/such/dir/f", 0644);
  ASSERT_FALSE(bad_dir.has_value());
  EXPECT_NE(bad_dir.error().message().find("cannot create /no/such/dir/f"), std::string::npos)
      << bad_dir.error().message();
}

}  // namespace
}  // namespace dsec::agent

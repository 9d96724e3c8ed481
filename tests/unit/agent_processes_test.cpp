// The guest agent's whole loop on the host (tests/support/agent_on_host.h) against the host
// client: processes that outlive the connection that started them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "guest/agent/passwd.h"
#include "tests/support/agent_on_host.h"
#include "vmm/agent/client.h"

namespace dsec::agent {
namespace {

using namespace std::chrono_literals;

class AgentProcesses : public ::testing::Test {
 protected:
  AgentClient client() { return agent_.client(); }

  struct Output {
    std::mutex mutex;
    std::string out, err;
    std::string text() {
      const std::lock_guard lock(mutex);
      return out;
    }
  };
  Result<ExitStatus> attach(uint32_t pid, Output& o) {
    return client().attach_process(
        pid,
        [&](std::span<const uint8_t> b) {
          const std::lock_guard lock(o.mutex);
          o.out.append(b.begin(), b.end());
          return ok();
        },
        [&](std::span<const uint8_t> b) {
          const std::lock_guard lock(o.mutex);
          o.err.append(b.begin(), b.end());
          return ok();
        });
  }

  // The process's entry, waiting (within a deadline) until `until` holds for it.
  std::optional<ProcessEntry> entry(
      uint32_t pid, const std::function<bool(const ProcessEntry&)>& until =
                        [](const ProcessEntry&) { return true; }) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto list = client().list_processes();
      EXPECT_TRUE(list.has_value()) << list.error().message();
      for (const auto& e : list ? list->processes : std::vector<ProcessEntry>{}) {
        if (e.pid == pid && until(e)) {
          return e;
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

  static std::span<const uint8_t> bytes(std::string_view s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }

  test::AgentOnHost agent_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

ProcessStartRequest shell(const std::string& script) {
  ProcessStartRequest req;
  req.argv = {"/bin/sh", "-c", script};
  return req;
}

TEST_F(AgentProcesses, HealthReportsTheVersionWithProcessesAndFiles) {
  auto h = client().health();
  ASSERT_TRUE(h.has_value()) << h.error().message();
  EXPECT_EQ(h->agent_version, "dsec-agent 3");
}

TEST_F(AgentProcesses, AProcessOutlivesItsConnectionIsListedAttachedAndSignalled) {
  auto req = shell("echo started; exec sleep 60");
  req.tag = "my-server";
  auto pid = client().start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  auto listed = entry(*pid);
  ASSERT_TRUE(listed.has_value());
  EXPECT_TRUE(listed->running);
  EXPECT_EQ(listed->tag, "my-server");
  EXPECT_EQ(listed->argv, req.argv);

  Output o;
  Result<ExitStatus> status = ExitStatus{};
  std::thread attached([&] { status = attach(*pid, o); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (o.text() != "started\n" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(o.text(), "started\n");
  ASSERT_TRUE(client().signal_process(*pid, SIGTERM).has_value());
  attached.join();
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(*status, (ExitStatus{ExitStatus::Kind::kSignaled, SIGTERM}));
  // Its end was told: it is gone from the list, and a signal to it says so.
  auto list = client().list_processes();
  ASSERT_TRUE(list.has_value());
  EXPECT_TRUE(list->processes.empty());
  auto again = client().signal_process(*pid, SIGTERM);
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message().find("no process " + std::to_string(*pid)), std::string::npos)
      << again.error().message();
}

TEST_F(AgentProcesses, OutputWaitsForAReaderAndASecondAttachGoesOnWhereTheFirstLeft) {
  auto req = shell("echo one; read x; echo two; echo err >&2; exit 3");
  req.stdin_open = true;
  auto pid = client().start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  // The first reader takes "one" and goes away while the process waits for its input.
  Output first;
  auto detached = client().attach_process(
      *pid,
      [&](std::span<const uint8_t> b) {
        first.out.append(b.begin(), b.end());
        return fail("enough");
      },
      [](std::span<const uint8_t>) { return ok(); });
  ASSERT_FALSE(detached.has_value());
  EXPECT_EQ(first.out, "one\n");
  ASSERT_TRUE(client().send_process_input(*pid, bytes("go\n")).has_value());
  ASSERT_TRUE(entry(*pid, [](const ProcessEntry& e) { return !e.running; }).has_value());
  Output second;
  auto status = attach(*pid, second);
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(second.out, "two\n");
  EXPECT_EQ(second.err, "err\n");
  EXPECT_EQ(*status, (ExitStatus{ExitStatus::Kind::kExited, 3}));
}

TEST_F(AgentProcesses, StdinIsStreamedAndItsCloseEndsIt) {
  ProcessStartRequest req;
  req.argv = {"cat"};
  req.stdin_open = true;
  auto pid = client().start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  const std::string big(200000, 'x');  // more than a frame, and more than a pipe holds
  ASSERT_TRUE(client().send_process_input(*pid, bytes(big)).has_value());
  ASSERT_TRUE(client().close_process_stdin(*pid).has_value());
  Output o;
  auto status = attach(*pid, o);
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(o.out.size(), big.size());
  EXPECT_EQ(*status, (ExitStatus{ExitStatus::Kind::kExited, 0}));
}

TEST_F(AgentProcesses, UnreadOutputIsBoundedAndWhatWasDroppedIsCounted) {
  auto pid = client().start_process(shell("head -c 3000000 /dev/zero; echo done >&2"));
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  auto done = entry(*pid, [](const ProcessEntry& e) { return !e.running; });
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->stdout_dropped, 3000000U - (1U << 20));
  EXPECT_EQ(done->stderr_dropped, 0U);
  Output o;
  auto status = attach(*pid, o);
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(o.out.size(), 1U << 20);
  EXPECT_EQ(o.err, "done\n");
}

TEST_F(AgentProcesses, BadRequestsAreRefusedWithWhatToDo) {
  auto c = client();
  auto missing = c.start_process(
      ProcessStartRequest{{"/no/such/program"}, {}, "", "", "", false, false, 24, 80});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("cannot run '/no/such/program'"), std::string::npos)
      << missing.error().message();
  auto user = c.start_process(
      ProcessStartRequest{{"true"}, {}, "", "", "no-such-user", false, false, 24, 80});
  ASSERT_FALSE(user.has_value());
  EXPECT_NE(user.error().message().find("no user 'no-such-user'"), std::string::npos)
      << user.error().message();
  Output o;
  auto attach_unknown = attach(999999, o);
  ASSERT_FALSE(attach_unknown.has_value());
  EXPECT_NE(attach_unknown.error().message().find("no process 999999"), std::string::npos);
  auto sleeper = c.start_process(shell("exec sleep 60"));
  ASSERT_TRUE(sleeper.has_value());
  auto no_stdin = c.send_process_input(*sleeper, bytes("x"));
  ASSERT_FALSE(no_stdin.has_value());
  EXPECT_NE(no_stdin.error().message().find("no stdin open"), std::string::npos);
  auto no_tty = c.resize_process_terminal(*sleeper, 10, 10);
  ASSERT_FALSE(no_tty.has_value());
  EXPECT_NE(no_tty.error().message().find("no terminal"), std::string::npos);
}

TEST_F(AgentProcesses, PastTheLimitStartsAreRefusedAndFinishedOnesMakeRoom) {
  auto c = client();
  std::vector<uint32_t> pids;
  for (size_t i = 0; i < kMaxProcesses; ++i) {
    auto pid = c.start_process(shell(i == 0 ? "echo unread" : "exec sleep 60"));
    ASSERT_TRUE(pid.has_value()) << i << ": " << pid.error().message();
    pids.push_back(*pid);
  }
  ASSERT_TRUE(entry(pids[0], [](const ProcessEntry& e) { return !e.running; }).has_value());
  // The finished one, its output unread, is reaped for room; then all 64 run.
  ASSERT_TRUE(c.start_process(shell("exec sleep 60")).has_value());
  auto refused = c.start_process(shell("true"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("already keeps 64 running processes"), std::string::npos)
      << refused.error().message();
}

TEST_F(AgentProcesses, ATerminalIsOneStreamAndTakesItsNewSize) {
  ProcessStartRequest req = shell("stty size; read line; stty size; echo got $line");
  req.pty = true;
  req.rows = 24;
  req.cols = 80;
  auto pid = client().start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  Output o;
  Result<ExitStatus> status = ExitStatus{};
  std::thread attached([&] { status = attach(*pid, o); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (o.text().find("24 80") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(client().resize_process_terminal(*pid, 30, 100).has_value());
  ASSERT_TRUE(client().send_process_input(*pid, bytes("hello\n")).has_value());
  attached.join();
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_NE(o.out.find("24 80\r\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("30 100\r\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("got hello"), std::string::npos) << o.out;
  EXPECT_TRUE(o.err.empty());
}

TEST_F(AgentProcesses, AProcessRunsAsTheUserItNamesInItsHome) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "switching to another user takes root; the e2e test "
                    "AgentApi.AProcessRunsAsTheImagesUnprivilegedUser runs it in a guest";
  }
  const auto nobody = lookup_user("nobody");
  ASSERT_TRUE(nobody.has_value()) << nobody.error().message();
  auto req = shell("id -u; id -g; echo $HOME $USER; pwd");
  req.user = "nobody";
  req.cwd = "/";
  auto pid = client().start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  Output o;
  auto status = attach(*pid, o);
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(o.out, std::to_string(nobody->uid) + "\n" + std::to_string(nobody->gid) + "\n" +
                       nobody->home + " nobody\n/\n");
}

TEST(AgentPasswd, FindsAUserAndNamesOneThatIsMissing) {
  const auto path =
      std::filesystem::temp_directory_path() / ("agent-passwd-" + std::to_string(::getpid()));
  std::ofstream(path) << "root:x:0:0:root:/root:/bin/bash\n"
                         "user:x:1000:1000::/home/user:/bin/bash\n"
                         "broken:x:abc:1::/:/bin/sh\n";
  auto user = lookup_user("user", path.string());
  ASSERT_TRUE(user.has_value()) << user.error().message();
  EXPECT_EQ(user->uid, 1000U);
  EXPECT_EQ(user->gid, 1000U);
  EXPECT_EQ(user->home, "/home/user");
  EXPECT_FALSE(lookup_user("nobody-here", path.string()).has_value());
  EXPECT_FALSE(lookup_user("broken", path.string()).has_value());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dsec::agent

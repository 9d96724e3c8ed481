// The embedding library's VMM process, with real processes: exit statuses, its log, a
// graceful stop and a forced one, what it inherits, and nothing left behind.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "sdk/vmm_process.h"
#include "tests/support/file_text.h"
#include "tests/support/open_fds.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace dsec::sdk::detail {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

bool process_exists(pid_t pid) {
  return std::filesystem::exists("/proc/" + std::to_string(pid));
}

class SdkVmmProcessTest : public ::testing::Test {
 protected:
  dsec::Result<VmmProcess> shell(const std::string& script) {
    return VmmProcess::spawn("/bin/sh", {"-c", script}, log_);
  }

  // Waits, up to a deadline, until the process's log says `text`.
  bool log_says(const std::string& text) const {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (test::file_text(log_).find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

  test::TempDir tmp_;
  std::string log_ = tmp_.file("vmm.log");
};

TEST_F(SdkVmmProcessTest, ItsExitStatusAndStderrAreKept) {
  ASSERT_OK_AND_ASSIGN(auto process, shell("echo to-stdout; echo to-stderr >&2; exit 7"));
  ASSERT_OK_AND_ASSIGN(const auto status, process.wait_for_exit(60s));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 7);
  EXPECT_FALSE(process.running());
  EXPECT_EQ(test::file_text(log_), "to-stderr\n");
}

TEST_F(SdkVmmProcessTest, StopEndsItWithSigtermAndReportsTheSignal) {
  ASSERT_OK_AND_ASSIGN(auto process, shell("exec sleep 600"));
  EXPECT_TRUE(process.running());
  ASSERT_OK_AND_ASSIGN(const auto still, process.wait_for_exit(0ms));
  EXPECT_FALSE(still.has_value());
  ASSERT_OK_AND_ASSIGN(const int status, process.stop(60s));
  EXPECT_EQ(status, 128 + SIGTERM);
  EXPECT_FALSE(process_exists(process.pid()));
}

TEST_F(SdkVmmProcessTest, OneThatIgnoresSigtermIsKilledAfterTheGrace) {
  // An ignored signal stays ignored across exec.
  ASSERT_OK_AND_ASSIGN(auto process, shell("trap '' TERM; echo ignoring >&2; exec sleep 600"));
  ASSERT_TRUE(log_says("ignoring"));
  ASSERT_OK_AND_ASSIGN(const int status, process.stop(200ms));
  EXPECT_EQ(status, 128 + SIGKILL);
}

TEST_F(SdkVmmProcessTest, ItGetsNoDescriptorOfOursAndDefaultSignals) {
  const UniqueFd inherited(::open("/dev/null", O_RDONLY));  // no O_CLOEXEC
  ASSERT_TRUE(inherited);
  sigset_t term{};
  sigset_t old{};
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  // Fd 3 and up closed; SIGTERM neither blocked (SigBlk) nor ignored (SigIgn).
  auto process = shell("test -e /proc/$$/fd/" + std::to_string(inherited.get()) +
                       " && exit 10; grep -E '^Sig(Blk|Ign)' /proc/$$/status >&2; "
                       "exec sleep 600");
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
  ASSERT_OK(process);
  ASSERT_OK_AND_ASSIGN(const int status, process->stop(60s));
  EXPECT_EQ(status, 128 + SIGTERM) << test::file_text(log_);
}

TEST_F(SdkVmmProcessTest, DestroyingOneThatRunsKillsAndReapsIt) {
  const size_t fds_before = test::open_fd_count();
  pid_t pid = -1;
  {
    ASSERT_OK_AND_ASSIGN(auto process, shell("trap '' TERM; exec sleep 600"));
    pid = process.pid();
    VmmProcess moved = std::move(process);
    EXPECT_TRUE(moved.running());
  }
  EXPECT_FALSE(process_exists(pid));
  EXPECT_EQ(test::open_fd_count(), fds_before);
}

TEST_F(SdkVmmProcessTest, ABinaryThatIsNotThereFailsToStart) {
  const auto started = VmmProcess::spawn(tmp_.file("no-such-vmm"), {}, log_);
  ASSERT_FALSE(started);
  EXPECT_THAT(started.error().message(),
              HasSubstr("starting " + tmp_.file("no-such-vmm").string()));
  EXPECT_EQ(started.error().os_errno(), ENOENT);
}

}  // namespace
}  // namespace dsec::sdk::detail

// The pool daemon's launcher (vmm/pool/launcher_process.h) over a stand-in VMM, a shell
// script: it starts only `VMM restore ...`, hands back the VMM's pidfd and ready pipe, the
// VMM gets the descriptors passed to it and is the launcher's child (not ours: it inherits
// nothing of the daemon's filter), how it ended comes back from the launcher, and the
// launcher ends with its object. Then the daemon itself under its filter, and its launcher
// outside it.
#include "vmm/pool/launcher_process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/temp_dir.h"

namespace dsec::pool {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class LauncherProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(vmm_) << "#!/bin/sh\n"
                           "read -r state <&4\n"
                           "echo \"args: $* state: $state\"\n"
                           "echo ready >&3\n"
                           "exit 7\n";
    ASSERT_EQ(::chmod(vmm_.c_str(), 0755), 0);
    std::ofstream(dir_.file("state")) << "the image's state\n";
    auto started = LauncherProcess::start(vmm_);
    ASSERT_TRUE(started) << started.error().message();
    launcher_ = std::move(*started);
  }

  test::TempDir dir_{"/tmp"};
  std::string vmm_ = dir_.file("vmm").string();
  std::unique_ptr<LauncherProcess> launcher_;
};

TEST_F(LauncherProcessTest, StartsTheVmmWithItsDescriptorsAndTellsHowItEnded) {
  const int state = ::open(dir_.file("state").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(state, 0);
  const std::string log = dir_.file("vmm.log").string();
  auto launched = launcher_->spawn({vmm_, "restore", "--state-fd", "4"}, log, {state});
  ::close(state);
  ASSERT_TRUE(launched) << launched.error().message();
  std::string ready(6, '\0');
  ASSERT_EQ(::read(launched->ready.get(), ready.data(), ready.size()), 6);
  EXPECT_EQ(ready, "ready\n");
  pollfd ended{.fd = launched->pidfd.get(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(::poll(&ended, 1, 10000), 1) << "the stand-in ends at once";
  // Not this process's child: the launcher's.
  siginfo_t info{};
  EXPECT_NE(::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(launched->pidfd.get()),
                     &info, WEXITED | WNOHANG),
            0);
  const ProcessEnd end = launcher_->reap(launched->identity.pid);
  EXPECT_EQ(end.exit_status, 7) << end.how;
  EXPECT_EQ(end.how, "exited with status 7");
  EXPECT_THAT(test::file_text(log), HasSubstr("args: restore --state-fd 4 state: the image's state"));
  // Reaped once: the pid is no longer the launcher's child.
  EXPECT_EQ(launcher_->reap(launched->identity.pid).exit_status, std::nullopt);
}

// A jailed clone (restore --jail-no-supervisor) is pid 1 of a pid namespace of its own, with
// the signals its VMM reads from a signalfd blocked from its first instruction (pid 1 would
// drop them otherwise), and the launcher's next child is born in the launcher's namespace
// again.
TEST_F(LauncherProcessTest, StartsAJailedCloneAsPid1OfItsOwnPidNamespace) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "a new pid namespace needs root";
  }
  std::ofstream(vmm_) << "#!/bin/sh\n"
                         "echo \"pid: $$\"\n"
                         // The shell's own mask (a builtin loop: no child of its own).
                         "while read -r line; do case $line in SigBlk*) echo \"$line\";; "
                         "esac; done </proc/self/status\n"
                         "echo ready >&3\n";
  const std::string log = dir_.file("vmm.log").string();
  for (const bool own : {true, false, true}) {
    ASSERT_EQ(::truncate(log.c_str(), 0) == 0 || errno == ENOENT, true);
    auto launched = launcher_->spawn({vmm_, "restore"}, log, {}, own);
    ASSERT_TRUE(launched) << launched.error().message();
    pollfd ended{.fd = launched->pidfd.get(), .events = POLLIN, .revents = 0};
    ASSERT_EQ(::poll(&ended, 1, 10000), 1);
    EXPECT_EQ(launcher_->reap(launched->identity.pid).exit_status, 0);
    const std::string out = test::file_text(log);
    if (own) {
      EXPECT_THAT(out, HasSubstr("pid: 1\n"));
      // SIGINT (2), SIGUSR1 (10), SIGUSR2 (12), SIGTERM (15): bits 1, 9, 11 and 14.
      EXPECT_THAT(out, HasSubstr("SigBlk:\t0000000000004a02"));
    } else {
      EXPECT_THAT(out, HasSubstr("pid: " + std::to_string(launched->identity.pid) + "\n"));
      EXPECT_THAT(out, HasSubstr("SigBlk:\t0000000000000000"));
    }
  }
}

TEST_F(LauncherProcessTest, StartsNothingButItsVmmsRestore) {
  const std::string log = dir_.file("vmm.log").string();
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"/bin/sh", "restore"}, {vmm_, "run"}, {vmm_}}) {
    const auto refused = launcher_->spawn(argv, log, {});
    ASSERT_FALSE(refused) << argv.size();
    EXPECT_THAT(refused.error().message(), HasSubstr("starts only `" + vmm_ + " restore`"));
  }
  EXPECT_FALSE(std::filesystem::exists(log)) << "nothing ran";
  // A pid that is not its child: how it ended is unknown.
  EXPECT_THAT(launcher_->reap(::getpid()).how, HasSubstr("not this daemon's child"));
}

TEST_F(LauncherProcessTest, EndsWithItsObject) {
  const pid_t pid = launcher_->pid();
  ASSERT_EQ(::kill(pid, 0), 0);
  launcher_.reset();
  EXPECT_EQ(::kill(pid, 0), -1) << "reaped";
  EXPECT_EQ(errno, ESRCH);
}

std::string status_line(const std::string& status_file, const std::string& field) {
  const std::string text = test::file_text(status_file);
  const size_t at = text.find(field + ":");
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

TEST(PoolDaemonSeccomp, EveryThreadOfTheServingDaemonIsFilteredAndItsLauncherIsNot) {
  const test::TempDir dir("/tmp");
  const test::PoolDaemon daemon(dir.path(), {"--no-jail"});
  ASSERT_TRUE(daemon.serving()) << daemon.log();
  const std::string task_dir = "/proc/" + std::to_string(daemon.pid()) + "/task";
  int threads = 0;
  std::string children;
  for (const auto& task : std::filesystem::directory_iterator(task_dir)) {
    ++threads;
    EXPECT_EQ(status_line(task.path() / "status", "Seccomp"), "Seccomp:\t2") << task.path();
    children += test::file_text(task.path() / "children");
  }
  EXPECT_GE(threads, 2) << "the main thread and the API's";
  const pid_t launcher = std::atoi(children.c_str());
  ASSERT_GT(launcher, 0) << "the launcher is the daemon's child";
  EXPECT_EQ(status_line("/proc/" + std::to_string(launcher) + "/status", "Seccomp"),
            "Seccomp:\t0");
}

TEST(PoolDaemonSeccomp, AForbiddenCallEndsTheDaemonWithALineThatNamesIt) {
  const test::TempDir dir("/tmp");
  ::setenv("DSEC_SECCOMP_SELFTEST", "pool", 1);
  test::PoolDaemon daemon(dir.path(), {"--no-jail"});
  ::unsetenv("DSEC_SECCOMP_SELFTEST");
  const std::string line = "(role pool) made forbidden syscall 41 (socket)";
  EXPECT_TRUE(test::eventually([&] { return daemon.log().find(line) != std::string::npos; }, 30s))
      << daemon.log();
  const int status = daemon.stop(SIGKILL);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 4) << status;
}

}  // namespace
}  // namespace dsec::pool

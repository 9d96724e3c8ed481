// The tests' own process runner: a command past its deadline is killed, after its last
// words when asked for them (what dsec-vmm run logs on SIGUSR1 about a hung guest).
#include "tests/support/run_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "tests/support/file_text.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// `wait` returns when a trapped signal arrives, so the shell answers at once.
const std::vector<std::string> kSleeper = {
    "/bin/sh", "-c", "trap 'echo last words >&2; exit 7' USR1; sleep 30 & wait"};

TEST(RunProcess, ACommandPastItsDeadlineIsKilled) {
  const ProcessOutput run = run_process(kSleeper, 300ms);
  EXPECT_TRUE(run.timed_out);
  EXPECT_EQ(run.exit_status, -1);
  EXPECT_THAT(run.err, Not(HasSubstr("last words")));
  EXPECT_LT(run.elapsed, 10s);
}

TEST(RunProcess, LastWordsComeBeforeTheKillAndStillCountAsTheDeadline) {
  const ProcessOutput run = run_process(kSleeper, 300ms, SIGUSR1);
  EXPECT_TRUE(run.timed_out);
  EXPECT_EQ(run.exit_status, -1);
  EXPECT_THAT(run.err, HasSubstr("last words"));
  EXPECT_LT(run.elapsed, 10s);
}

TEST(RunProcess, ACommandThatEndsInTimeGetsNoSignal) {
  const ProcessOutput run = run_process({"/bin/sh", "-c", "echo done"}, 10s, SIGUSR1);
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_status, 0);
  EXPECT_EQ(run.out, "done\n");
}

TEST(DescribeWaitStatus, SaysHowTheProcessEnded) {
  EXPECT_EQ(describe_wait_status(1 << 8), "exited with status 1");
  EXPECT_EQ(describe_wait_status(SIGSEGV), "was killed by signal 11 (Segmentation fault)");
}

// A failure message lists a sandbox's console and then its VMM's log: an empty console
// must not swallow the log after it (what `out << std::ifstream(path).rdbuf()` did).
TEST(FileSection, AnEmptyOrMissingFileSaysSoAndWhatFollowsStillPrints) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("file-section-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "empty.log").flush();
  std::ofstream(dir / "vmm.log") << "error: the reason";
  const std::string text = file_section("console", dir / "empty.log") +
                           file_section("log", dir / "vmm.log") +
                           file_section("missing", dir / "none.log");
  EXPECT_THAT(text, HasSubstr("empty.log)\n(empty)\n--- log ("));
  EXPECT_THAT(text, HasSubstr("vmm.log)\nerror: the reason\n--- missing ("));
  EXPECT_THAT(text, HasSubstr("none.log)\n(no such file)\n"));
  EXPECT_EQ(file_text(dir / "vmm.log"), "error: the reason");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsec::test

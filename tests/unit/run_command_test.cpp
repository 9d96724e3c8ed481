// The tests' own process runner: a command past its deadline is killed, after its last
// words when asked for them (what dsec-vmm run logs on SIGUSR1 about a hung guest).
#include "tests/support/run_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dsec::test

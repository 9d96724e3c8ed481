// `--seccomp` on the commands that run a VM, and its errors, which need no KVM: a bad mode
// and a test hook that names no role are refused before anything starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

TEST(CliSeccomp, EveryCommandThatRunsAVmTakesTheModeAndRunDocumentsItsExitStatus) {
  for (const char* command : {"run", "warm", "restore", "serve"}) {
    const CommandOutput help = run_command(kVmm + " " + command + " --help");
    EXPECT_EQ(help.exit_status, 0) << command;
    EXPECT_THAT(help.output, AllOf(HasSubstr("--seccomp"), HasSubstr("docs/seccomp.md")))
        << command;
  }
  const CommandOutput run = run_command(kVmm + " run --help");
  EXPECT_THAT(run.output, HasSubstr("4 when a thread of the VMM made a system call its seccomp"));
}

TEST(CliSeccomp, AnUnknownModeIsRefused) {
  const CommandOutput bad = run_command(kVmm + " run --seccomp=strict 2>&1");
  EXPECT_NE(bad.exit_status, 0);
  EXPECT_THAT(bad.output, AllOf(HasSubstr("--seccomp"), HasSubstr("strict")));
}

TEST(CliSeccomp, ASelftestThatNamesNoRoleIsABadConfiguration) {
  const CommandOutput bad = run_command("DSEC_SECCOMP_SELFTEST=gpu " + kVmm + " run 2>&1");
  EXPECT_EQ(bad.exit_status, 1);
  EXPECT_THAT(bad.output, AllOf(HasSubstr("DSEC_SECCOMP_SELFTEST=gpu names no thread role"),
                                HasSubstr("vcpu, io, console, signals, api, profiler")));
}

}  // namespace
}  // namespace dsec::test

// The dsec-vmm binary's help and error paths, which need no KVM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/run_command.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kVmm = DSEC_BINARY_DIR "/vmm/dsec-vmm";

TEST(CliErrors, HelpListsTheSmokeSubcommand) {
  const CommandOutput help = run_command(kVmm + " --help");
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_THAT(help.output, AllOf(HasSubstr("smoke"), HasSubstr("SUBCOMMAND")));

  const CommandOutput smoke_help = run_command(kVmm + " smoke --help");
  EXPECT_EQ(smoke_help.exit_status, 0);
  EXPECT_THAT(smoke_help.output, AllOf(HasSubstr("--device"), HasSubstr("/dev/kvm"),
                                       HasSubstr("0x3f8"), HasSubstr("exits 1")));
}

TEST(CliErrors, RunHelpTellsThatTheRngIsOptIn) {
  const CommandOutput help = run_command(kVmm + " run --help");
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_THAT(help.output, AllOf(HasSubstr("--rng"), HasSubstr("virtio-rng"),
                                 HasSubstr("off by default")));
}

TEST(CliErrors, RunHelpDescribesNet) {
  const CommandOutput help = run_command(kVmm + " run --help");
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_THAT(help.output, AllOf(HasSubstr("--net"), HasSubstr("virtio-net"), HasSubstr("tap=NAME")));
}

TEST(CliErrors, SmokeWithoutKvmPrintsWhatToDoOnStderrAndExitsOne) {
  // stderr only: stdout goes to /dev/null.
  const CommandOutput result =
      run_command(kVmm + " smoke --device /nonexistent/kvm 2>&1 >/dev/null");
  EXPECT_EQ(result.exit_status, 1);
  EXPECT_THAT(result.output, AllOf(HasSubstr("/nonexistent/kvm"), HasSubstr("kvm_amd"),
                                   HasSubstr("tools/kvm-harness")));
}

TEST(CliErrors, NoSubcommandIsAUsageError) {
  const CommandOutput result = run_command(kVmm + " 2>&1");
  EXPECT_NE(result.exit_status, 0);
  EXPECT_THAT(result.output, HasSubstr("subcommand is required"));
}

}  // namespace
}  // namespace dsec::test

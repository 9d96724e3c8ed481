// `dsec-vmm run|restore --jail`: the help and the errors given before anything starts
// (no root, no KVM needed). A jail that runs is tested in tests/e2e/jail_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

class JailCli : public ::testing::Test {
 protected:
  JailCli() {
    std::ofstream(kernel_) << "not booted: the command fails before";
    std::filesystem::create_directory(jail_);
  }
  // `dsec-vmm run` with a kernel and initrd (never loaded) and `args`; its stderr.
  CommandOutput run(const std::string& args) const {
    return run_command(kVmm + " run --kernel " + kernel_ + " --initrd " + kernel_ + " " + args +
                       " 2>&1 >/dev/null");
  }
  std::string jail(const std::string& ids = "--uid 1000 --gid 1000") const {
    return "--jail " + jail_ + " " + ids;
  }

  TempDir dir_;
  std::string kernel_ = dir_.file("kernel");
  std::string jail_ = dir_.file("jail");
};

TEST_F(JailCli, RunAndRestoreHelpDescribeTheJail) {
  for (const char* command : {"run", "restore"}) {
    const CommandOutput help = run_command(kVmm + " " + command + " --help");
    EXPECT_EQ(help.exit_status, 0);
    EXPECT_THAT(help.output, AllOf(HasSubstr("--jail"), HasSubstr("--uid"), HasSubstr("--gid"),
                                   HasSubstr("--cgroup"), HasSubstr("--cgroup-parent"),
                                   HasSubstr("--rlimit-nofile"), HasSubstr("pivot_root"),
                                   HasSubstr("exit status 4"), HasSubstr("docs/jail.md")))
        << command;
  }
}

TEST_F(JailCli, TheIdsAndTheJailGoTogether) {
  const CommandOutput ids_alone = run("--uid 1000 --gid 1000");
  EXPECT_NE(ids_alone.exit_status, 0);
  EXPECT_THAT(ids_alone.output, HasSubstr("--uid requires --jail"));
  const CommandOutput no_ids = run("--jail " + jail_);
  EXPECT_NE(no_ids.exit_status, 0);
  EXPECT_THAT(no_ids.output, HasSubstr("--jail requires --uid"));
  const CommandOutput cgroup_alone = run("--cgroup memory.max=1G");
  EXPECT_NE(cgroup_alone.exit_status, 0);
  EXPECT_THAT(cgroup_alone.output, HasSubstr("--cgroup requires --jail"));
}

TEST_F(JailCli, RootIdsAreRefused) {
  const CommandOutput root = run(jail("--uid 0 --gid 0"));
  EXPECT_EQ(root.exit_status, 1);
  EXPECT_THAT(root.output, HasSubstr("dsec-vmm run: --jail needs an unprivileged --uid and --gid"));
}

TEST_F(JailCli, AMissingJailDirectoryIsRefused) {
  const CommandOutput missing = run("--jail " + dir_.file("nowhere").string() + " --uid 1 --gid 1");
  EXPECT_EQ(missing.exit_status, 1);
  EXPECT_THAT(missing.output, HasSubstr("create the directory first"));
}

TEST_F(JailCli, ABadCgroupSettingIsRefused) {
  const CommandOutput bad = run(jail() + " --cgroup memory.max");
  EXPECT_EQ(bad.exit_status, 1);
  EXPECT_THAT(bad.output, HasSubstr("--cgroup 'memory.max' has no '='"));
}

TEST_F(JailCli, PathsTheVmmUsesAfterItsPivotMustBeInTheJail) {
  for (const auto& [option, value] : std::vector<std::pair<std::string, std::string>>{
           {"--vsock", dir_.file("vsock")},
           {"--api-sock", dir_.file("api.sock")},
           {"--metrics-file", dir_.file("metrics.json")},
           {"--profile-guest", dir_.file("guest.prof")}}) {
    const CommandOutput outside = run(jail() + " " + option + " " + value);
    EXPECT_EQ(outside.exit_status, 1) << option;
    EXPECT_THAT(outside.output, AllOf(HasSubstr(option + " " + value + " is outside the jail"),
                                      HasSubstr("put it there, e.g. " + jail_ + "/")))
        << option;
  }
}

TEST_F(JailCli, ARestoresPathsAreCheckedToo) {
  const std::string snapshot = dir_.file("snapshot");
  std::filesystem::create_directory(snapshot);
  const CommandOutput outside =
      run_command(kVmm + " restore " + snapshot + " " + jail() + " --vsock " +
                  dir_.file("clone.vsock").string() + " 2>&1");
  EXPECT_EQ(outside.exit_status, 1);
  EXPECT_THAT(outside.output,
              HasSubstr("dsec-vmm restore: --vsock " + dir_.file("clone.vsock").string() +
                        " is outside the jail"));
}

// --net fd=N, the jail's way to the host's network: its form is checked before anything
// starts.
TEST_F(JailCli, ANetFdMustBeADescriptorAboveStderrAndTheOnlyTap) {
  const CommandOutput stderr_fd = run("--net fd=2");
  EXPECT_EQ(stderr_fd.exit_status, 1);
  EXPECT_THAT(stderr_fd.output, HasSubstr("--net fd=2: fd=2 is not a file descriptor above 2"));
  const CommandOutput not_a_number = run("--net fd=3x");
  EXPECT_EQ(not_a_number.exit_status, 1);
  EXPECT_THAT(not_a_number.output, HasSubstr("fd=3x is not a file descriptor"));
  const CommandOutput twice = run("--net fd=3,tap=sbtap0");
  EXPECT_EQ(twice.exit_status, 1);
  EXPECT_THAT(twice.output, HasSubstr("names a TAP twice (tap= and fd=)"));
  const CommandOutput addressed = run("--net fd=3,host=10.0.0.1/24");
  EXPECT_EQ(addressed.exit_status, 1);
  EXPECT_THAT(addressed.output, HasSubstr("is a TAP handed in: it takes no tap= or host="));
}

}  // namespace
}  // namespace dsec::test

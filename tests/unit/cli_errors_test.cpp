// The dsec-vmm binary's help and error paths, which need no KVM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

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
  EXPECT_THAT(help.output,
              AllOf(HasSubstr("--rng"), HasSubstr("virtio-rng"), HasSubstr("off by default")));
}

TEST(CliErrors, RunHelpDescribesNet) {
  const CommandOutput help = run_command(kVmm + " run --help");
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_THAT(help.output,
              AllOf(HasSubstr("--net"), HasSubstr("virtio-net"), HasSubstr("tap=NAME")));
}

TEST(CliErrors, TheConsoleLimitAndTheAnswerTimeoutAreInTheHelp) {
  for (const char* command : {"run", "warm", "restore", "serve"}) {
    const CommandOutput help = run_command(kVmm + " " + command + " --help");
    EXPECT_EQ(help.exit_status, 0);
    EXPECT_THAT(help.output, AllOf(HasSubstr("--console-limit"), HasSubstr("=64MiB"))) << command;
  }
  for (const char* command : {"exec", "cp"}) {
    const CommandOutput help = run_command(kVmm + " " + command + " --help");
    EXPECT_EQ(help.exit_status, 0);
    EXPECT_THAT(help.output, AllOf(HasSubstr("--answer-timeout"), HasSubstr("=30"))) << command;
  }
  const CommandOutput cp_help = run_command(kVmm + " cp --help");
  EXPECT_THAT(cp_help.output, HasSubstr("never setuid, setgid or sticky"));
}

TEST(CliErrors, AConsoleLimitWithAnUnknownUnitIsAUsageError) {
  const CommandOutput bad =
      run_command(kVmm + " run --console /dev/null --console-limit 12XB 2>&1");
  EXPECT_NE(bad.exit_status, 0);
  EXPECT_THAT(bad.output, HasSubstr("--console-limit: xb unit not recognized"));
}

TEST(CliErrors, AnExecWhoseVmSocketIsMissingSaysSoAndExits125) {
  const CommandOutput missing =
      run_command(kVmm + " exec --answer-timeout 1 /nonexistent/v.sock -- true 2>&1");
  EXPECT_EQ(missing.exit_status, 125);
  EXPECT_THAT(missing.output, HasSubstr("is the VM running with this vsock socket?"));
}

// --wait keeps trying while the socket is missing, then gives up with the reason.
TEST(CliErrors, AnExecOrCpThatWaitsForAnAgentThatNeverComesFailsAfterTheWait) {
  const auto started = std::chrono::steady_clock::now();
  const CommandOutput exec =
      run_command(kVmm + " exec --wait 0.5 /nonexistent/v.sock -- true 2>&1");
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
  EXPECT_EQ(exec.exit_status, 125);
  EXPECT_THAT(exec.output, AllOf(HasSubstr("did not answer within 500 ms"),
                                 HasSubstr("is the VM running with this vsock socket?")));

  const CommandOutput cp = run_command(kVmm +
                                       " cp --wait 0.2 /nonexistent/v.sock /etc/hostname "
                                       "vm:/tmp/h 2>&1");
  EXPECT_EQ(cp.exit_status, 1);
  EXPECT_THAT(cp.output, HasSubstr("did not answer within 200 ms"));
  EXPECT_THAT(run_command(kVmm + " exec --help").output, HasSubstr("--wait"));
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

TEST(CliErrors, TheApiCommandsAndOptionsAreInTheHelp) {
  const CommandOutput help = run_command(kVmm + " --help");
  EXPECT_THAT(help.output, AllOf(HasSubstr("serve"), HasSubstr("snapshot")));
  for (const char* command : {"run", "restore"}) {
    const CommandOutput sub = run_command(kVmm + " " + command + " --help");
    EXPECT_EQ(sub.exit_status, 0);
    EXPECT_THAT(sub.output, AllOf(HasSubstr("--api-sock"), HasSubstr("PATCH /vm"),
                                  HasSubstr("PUT /snapshot/create"), HasSubstr("--id")))
        << command;
  }
  const CommandOutput serve = run_command(kVmm + " serve --help");
  EXPECT_THAT(serve.output, AllOf(HasSubstr("PUT /snapshot/load"), HasSubstr("vsock_override"),
                                  HasSubstr("--agent-timeout")));
  const CommandOutput snapshot = run_command(kVmm + " snapshot --help");
  EXPECT_THAT(snapshot.output, AllOf(HasSubstr("create"), HasSubstr("pause"), HasSubstr("resume")));
  const CommandOutput create = run_command(kVmm + " snapshot create --help");
  EXPECT_THAT(create.output, AllOf(HasSubstr("--out"), HasSubstr("--resume"),
                                   HasSubstr("--out/state and --out/memory")));
}

TEST(CliErrors, ServeAndSnapshotNeedAnApiSocket) {
  const CommandOutput serve = run_command(kVmm + " serve 2>&1");
  EXPECT_EQ(serve.exit_status, 1);
  EXPECT_THAT(serve.output, HasSubstr("give --api-sock PATH, or --no-api with --config-file"));
  const CommandOutput no_api = run_command(kVmm + " serve --no-api 2>&1");
  EXPECT_NE(no_api.exit_status, 0);
  EXPECT_THAT(no_api.output, HasSubstr("--no-api requires --config-file"));
  const CommandOutput pause = run_command(kVmm + " snapshot pause 2>&1");
  EXPECT_NE(pause.exit_status, 0);
  EXPECT_THAT(pause.output, HasSubstr("--api-sock is required"));
}

TEST(CliErrors, ABadConfigFileIsRefusedBeforeAnythingStarts) {
  const std::string file = ::testing::TempDir() + "dsec-config.json";
  run_command("echo '{\"boot-source\": {\"kernel_image_path\": \"/nonexistent/vmlinux\"}}' > " +
              file);
  const CommandOutput serve = run_command(kVmm + " serve --no-api --config-file " + file + " 2>&1");
  EXPECT_EQ(serve.exit_status, 1);
  EXPECT_THAT(serve.output, HasSubstr("dsec-vmm serve: --config-file " + file +
                                      ": kernel_image_path /nonexistent/vmlinux"));
  const CommandOutput missing =
      run_command(kVmm + " serve --no-api --config-file /nonexistent/vm.json 2>&1");
  EXPECT_EQ(missing.exit_status, 1);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent/vm.json"));
}

TEST(CliErrors, AnApiSocketPathThatIsAFileIsRefusedBeforeAnythingStarts) {
  const std::string file = ::testing::TempDir() + "dsec-not-a-socket";
  run_command("echo x > " + file);
  const CommandOutput serve = run_command(kVmm + " serve --api-sock " + file + " 2>&1");
  EXPECT_EQ(serve.exit_status, 1);
  EXPECT_THAT(serve.output, HasSubstr("--api-sock: " + file + " exists and is not a socket"));
  const CommandOutput run =
      run_command(kVmm + " run --kernel /bin/true --initrd /bin/true --api-sock " + file + " 2>&1");
  EXPECT_EQ(run.exit_status, 1);
  EXPECT_THAT(run.output, HasSubstr("exists and is not a socket"));
  run_command("rm -f " + file);
}

// The HTTP server is the pool daemon's too: its error names the daemon's option.
TEST(CliErrors, APoolSocketPathThatIsAFileIsRefusedByItsOwnOption) {
  TempDir dir;
  const std::string file = dir.file("not-a-socket").string();
  run_command("echo x > " + file);
  const CommandOutput pool =
      run_command("timeout 60 " + kVmm + " pool --no-jail --state-dir " +
                  dir.file("state").string() + " --socket " + file + " 2>&1");
  EXPECT_EQ(pool.exit_status, 1) << pool.output;
  EXPECT_THAT(pool.output, HasSubstr("--socket: " + file + " exists and is not a socket"));
  EXPECT_THAT(pool.output, Not(HasSubstr("--api-sock")));
}

TEST(CliErrors, NetnsIsInRunAndRestoreHelpAndABadOneIsRefusedBeforeAnythingStarts) {
  for (const char* command : {"run", "restore"}) {
    const CommandOutput help = run_command(kVmm + " " + command + " --help");
    EXPECT_THAT(help.output, AllOf(HasSubstr("--netns"), HasSubstr("/run/netns/NAME"))) << command;
  }
  const CommandOutput missing = run_command(kVmm + " run --netns dsec-no-such-netns 2>&1");
  EXPECT_EQ(missing.exit_status, 1);
  EXPECT_THAT(missing.output, AllOf(HasSubstr("/run/netns/dsec-no-such-netns"),
                                    HasSubstr("No such file"), HasSubstr("make it first")));
  const CommandOutput bad_name = run_command(kVmm + " restore /tmp --netns ../x 2>&1");
  EXPECT_EQ(bad_name.exit_status, 1);
  EXPECT_THAT(bad_name.output, HasSubstr("'../x' is not a network namespace's name"));
  if (::geteuid() == 0) {  // setns itself tells a file that is no namespace
    const CommandOutput not_netns = run_command(kVmm + " run --netns /etc/hostname 2>&1");
    EXPECT_EQ(not_netns.exit_status, 1);
    EXPECT_THAT(not_netns.output, HasSubstr("it is not a network namespace's file"));
  }
}

}  // namespace
}  // namespace dsec::test

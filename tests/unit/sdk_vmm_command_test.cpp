// The dsec-vmm command lines the embedding library runs, and the options it refuses
// before starting anything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sdk/vmm_command.h"

namespace dsec::sdk::detail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SdkVmmCommandTest, RuntimeFilesLiveInTheRuntimeDirectoryUnlessTheConsoleIsGiven) {
  LaunchOptions launch;
  auto files = runtime_files("/run/sb", launch);
  EXPECT_EQ(files.vsock, "/run/sb/vsock");
  EXPECT_EQ(files.api_socket, "/run/sb/api.sock");
  EXPECT_EQ(files.console, "/run/sb/console.log");
  EXPECT_EQ(files.vmm_log, "/run/sb/vmm.log");
  launch.console_path = "/var/log/sb1.console";
  EXPECT_EQ(runtime_files("/run/sb", launch).console, "/var/log/sb1.console");
}

TEST(SdkVmmCommandTest, BootArgumentsCarryTheAgentTheDevicesAndTheSandboxsFiles) {
  BootOptions options;
  options.kernel = "/img/kernel";
  options.initrd = "/img/initrd";
  options.vcpus = 2;
  options.memory_mib = 256;
  options.drives = {"/disk.img,ro"};
  options.append = {"quiet"};
  options.launch.seccomp = "log";
  const auto files = runtime_files("/run/sb", options.launch);
  EXPECT_THAT(
      boot_arguments(options, files),
      ElementsAre("run", "--vcpus", "2", "--memory", "256", "--append", "dsec.agent", "--kernel",
                  "/img/kernel", "--initrd", "/img/initrd", "--rng", "--drive", "/disk.img,ro",
                  "--append", "quiet", "--vsock", "/run/sb/vsock", "--api-sock", "/run/sb/api.sock",
                  "--console", "/run/sb/console.log", "--seccomp", "log"));
  options.kernel.clear();
  options.initrd.clear();
  options.rng = false;
  options.drives.clear();
  options.append.clear();
  EXPECT_THAT(boot_arguments(options, files),
              ElementsAre("run", "--vcpus", "2", "--memory", "256", "--append", "dsec.agent",
                          "--vsock", "/run/sb/vsock", "--api-sock", "/run/sb/api.sock", "--console",
                          "/run/sb/console.log", "--seccomp", "log"));
}

TEST(SdkVmmCommandTest, RestoreArgumentsGiveTheCloneItsOwnSocketsAndTheReadyTimeout) {
  RestoreOptions options{.snapshot_dir = "/snap/warm", .launch = {}};
  options.launch.ready_timeout = std::chrono::milliseconds(2500);
  const auto files = runtime_files("/run/sb", options.launch);
  EXPECT_THAT(restore_arguments(options, files),
              ElementsAre("restore", "/snap/warm", "--agent-timeout", "2.500000", "--vsock",
                          "/run/sb/vsock", "--api-sock", "/run/sb/api.sock", "--console",
                          "/run/sb/console.log", "--seccomp", "on"));
}

TEST(SdkVmmCommandTest, BadOptionsAreRefusedBeforeAnythingStarts) {
  BootOptions no_cpu;
  no_cpu.vcpus = 0;
  ASSERT_FALSE(check_boot(no_cpu));
  EXPECT_EQ(check_boot(no_cpu).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(check_boot(no_cpu).error().message(), HasSubstr("vcpus 0"));

  BootOptions kernel_only;
  kernel_only.kernel = "/img/kernel";
  ASSERT_FALSE(check_boot(kernel_only));
  EXPECT_THAT(check_boot(kernel_only).error().message(), HasSubstr("both a kernel and an initrd"));

  BootOptions bad_seccomp;
  bad_seccomp.launch.seccomp = "strict";
  ASSERT_FALSE(check_boot(bad_seccomp));
  EXPECT_THAT(check_boot(bad_seccomp).error().to_string(),
              HasSubstr("seccomp mode 'strict' is not one we know; give on, log or off"));

  BootOptions no_wait;
  no_wait.launch.ready_timeout = std::chrono::milliseconds(0);
  EXPECT_FALSE(check_boot(no_wait));

  EXPECT_FALSE(check_restore(RestoreOptions{}));
  EXPECT_TRUE(check_boot(BootOptions{}));
}

TEST(SdkVmmCommandTest, SocketPathsMustFitAUnixSocketAddressWithTheVsockPortSuffix) {
  const LaunchOptions launch;
  EXPECT_TRUE(check_socket_paths(runtime_files("/run/dsec-sandbox.abcdef", launch)));
  // 107 bytes is a sockaddr_un's limit; the vsock socket also needs "_<port>" beside it.
  const std::string deep = "/" + std::string(90, 'd');
  const auto refused = check_socket_paths(runtime_files(deep, launch));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message(), HasSubstr(deep + "/vsock is too long"));
  EXPECT_THAT(refused.error().hint(), HasSubstr("runtime_parent"));
}

TEST(SdkVmmCommandTest, RuntimeParentIsTheOptionElseXdgRuntimeDirElseTmp) {
  LaunchOptions launch;
  EXPECT_EQ(runtime_parent(launch, nullptr), "/tmp");
  EXPECT_EQ(runtime_parent(launch, ""), "/tmp");
  EXPECT_EQ(runtime_parent(launch, "/run/user/1000"), "/run/user/1000");
  launch.runtime_parent = "/run/dsec";
  EXPECT_EQ(runtime_parent(launch, "/run/user/1000"), "/run/dsec");
}

}  // namespace
}  // namespace dsec::sdk::detail

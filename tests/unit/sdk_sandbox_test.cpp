// Sandbox::boot and restore against the real dsec-vmm, where it fails before any KVM call
// (so on any host): the error says why, with the VMM's own words, and nothing is left
// behind (no process, no runtime directory, no descriptor).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dsec/sandbox.h"
#include "tests/support/build_paths.h"
#include "tests/support/open_fds.h"
#include "tests/support/temp_dir.h"

namespace dsec::sdk {
namespace {

using ::testing::HasSubstr;

class SdkSandboxTest : public ::testing::Test {
 protected:
  LaunchOptions launch() const {
    LaunchOptions launch;
    launch.vmm_binary = dsec::test::binary_path("/vmm/dsec-vmm");
    launch.runtime_parent = runtime_.path();
    launch.ready_timeout = std::chrono::seconds(60);
    return launch;
  }

  // Boots with `options`, which must fail with `code` and `text` in its error, leaving the
  // runtime parent empty.
  void expect_refused(const BootOptions& options, ErrorCode code, const std::string& text) {
    const auto sandbox = Sandbox::boot(options);
    ASSERT_FALSE(sandbox);
    EXPECT_EQ(sandbox.error().code(), code) << sandbox.error().to_string();
    EXPECT_THAT(sandbox.error().to_string(), HasSubstr(text));
    EXPECT_TRUE(runtime_.entries().empty());
  }

  test::TempDir runtime_;
  test::TempDir files_;
};

TEST_F(SdkSandboxTest, AVmmThatEndsBeforeItIsReadyIsReportedWithItsLogAndCleanedUp) {
  const auto not_a_kernel = files_.file("kernel");
  std::ofstream(not_a_kernel) << "not a kernel\n";
  std::ofstream(files_.file("initrd")) << "not an initrd\n";
  BootOptions options;
  options.kernel = not_a_kernel;
  options.initrd = files_.file("initrd");
  options.launch = launch();
  const size_t fds_before = test::open_fd_count();

  const auto sandbox = Sandbox::boot(options);
  ASSERT_FALSE(sandbox);
  EXPECT_EQ(sandbox.error().code(), ErrorCode::kVmmExited) << sandbox.error().to_string();
  EXPECT_THAT(sandbox.error().message(),
              HasSubstr("dsec-vmm run exited with status 1 before the sandbox was ready"));
  // The VMM's own reason, from its log.
  EXPECT_THAT(sandbox.error().message(), HasSubstr(not_a_kernel));
  EXPECT_TRUE(runtime_.entries().empty());
  EXPECT_EQ(test::open_fd_count(), fds_before);
}

TEST_F(SdkSandboxTest, ARestoreOfAMissingSnapshotSaysWhichAndLeavesNothing) {
  RestoreOptions options{.snapshot_dir = files_.file("no-snapshot"), .launch = launch()};
  const auto sandbox = Sandbox::restore(options);
  ASSERT_FALSE(sandbox);
  EXPECT_EQ(sandbox.error().code(), ErrorCode::kVmmExited);
  EXPECT_THAT(sandbox.error().message(), HasSubstr("dsec-vmm restore exited with status"));
  EXPECT_THAT(sandbox.error().message(), HasSubstr("no-snapshot"));
  EXPECT_TRUE(runtime_.entries().empty());
}

TEST_F(SdkSandboxTest, NoBinaryIsNotFoundAndStartsNothing) {
  BootOptions options;
  options.launch = launch();
  options.launch.vmm_binary = files_.file("dsec-vmm");
  expect_refused(options, ErrorCode::kNotFound, "LaunchOptions::vmm_binary");
}

TEST_F(SdkSandboxTest, ARuntimeParentThatIsNotThereIsAHostError) {
  BootOptions options;
  options.launch = launch();
  options.launch.runtime_parent = files_.file("missing/parent");
  expect_refused(options, ErrorCode::kHost, files_.file("missing/parent"));
}

}  // namespace
}  // namespace dsec::sdk

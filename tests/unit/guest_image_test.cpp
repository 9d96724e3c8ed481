// GuestImagePlan: the kernel, initrd and command line checked against guest memory before
// any write, then written together.
#include "vmm/machine/guest_image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/x86_kernel_images.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::machine {
namespace {

using ::testing::HasSubstr;
using x86_64::kMiB;
using x86_64::test::read_guest;
using x86_64::test::write_file;

class GuestImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Files of this test's own: ctest runs the tests as processes side by side, and one
    // that rewrote a file another has mapped would kill that one with SIGBUS.
    config_.kernel_path = dir_.file("vmlinux");
    config_.initrd_path = dir_.file("initrd");
    write_file(config_.kernel_path, x86_64::test::ElfImage()
                                        .entry(16 * kMiB)
                                        .load(16 * kMiB, x86_64::test::pattern(0x2000, 1))
                                        .build());
    write_file(config_.initrd_path, x86_64::test::pattern(3000, 2));
    config_.cmdline = "console=ttyS0 quiet";
  }
  test::TempDir dir_;
  MachineConfig config_;
  GuestMemory memory_ =
      std::move(GuestMemory::anonymous(x86_64::ram_regions(64 * kMiB).value()).value());
};

TEST_F(GuestImageTest, APlanWritesNothingThenItsWriteLoadsKernelInitrdAndCommandLine) {
  ASSERT_OK_AND_ASSIGN(const GuestImagePlan plan, GuestImagePlan::create(config_, memory_));
  EXPECT_EQ(plan.kernel().entry, 16 * kMiB);
  const std::vector<uint8_t> cmdline(config_.cmdline.begin(), config_.cmdline.end());
  EXPECT_EQ(read_guest(memory_, 16 * kMiB, 0x2000), std::vector<uint8_t>(0x2000, 0));
  EXPECT_EQ(read_guest(memory_, x86_64::kCmdlineAddr, cmdline.size()),
            std::vector<uint8_t>(cmdline.size(), 0));

  ASSERT_OK(plan.write(memory_));
  EXPECT_EQ(read_guest(memory_, 16 * kMiB, 0x2000), x86_64::test::pattern(0x2000, 1));
  EXPECT_EQ(read_guest(memory_, x86_64::kCmdlineAddr, cmdline.size()), cmdline);
}

TEST_F(GuestImageTest, EachMistakeShowsInThePlan) {
  config_.cmdline = std::string("a\0b", 3);
  EXPECT_THAT(GuestImagePlan::create(config_, memory_).error().message(), HasSubstr("NUL"));
  config_.cmdline = "quiet";
  write_file(config_.kernel_path, {'n', 'o', 'p', 'e'});
  EXPECT_THAT(GuestImagePlan::create(config_, memory_).error().message(),
              HasSubstr("not a bzImage or ELF vmlinux"));
  config_.kernel_path = "/nonexistent/vmlinux";
  EXPECT_THAT(GuestImagePlan::create(config_, memory_).error().message(),
              HasSubstr("/nonexistent/vmlinux"));
}

}  // namespace
}  // namespace dsec::machine

// End to end: a boot of the default image with --profile-guest writes samples of where the
// guest was, and tools/guest-profile names the kernel functions they fall in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/dsec_vmm.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kBootDeadline = 180s;
constexpr uint64_t kKernelHalf = 0xffff800000000000;

TEST(GuestProfile, AProfiledBootStillBootsAndItsSamplesResolveToKernelFunctions) {
  const DefaultImage image = default_image();
  if (image.vmlinux.empty()) {
    return;
  }
  const std::filesystem::path profile = std::filesystem::path(dsec::test::binary_path("")) /
                                        ("e2e-guest-profile-" + std::to_string(::getpid()));
  const ProcessOutput run = run_vmm({"run", "--kernel", image.vmlinux.string(), "--profile-guest",
                                     profile.string(), "--profile-interval-us", "500"},
                                    kBootDeadline);
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  ASSERT_TRUE(find_banner(run.out).has_value()) << "no banner\n" << run.describe();
  EXPECT_THAT(run.err, HasSubstr("guest profile: "));

  std::ifstream in(profile);
  ASSERT_TRUE(in) << "no profile at " << profile << "\n" << run.describe();
  std::string line;
  int samples = 0;
  int kernel_samples = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    unsigned vcpu = 0;
    uint64_t us = 0;
    uint64_t rip = 0;
    ASSERT_TRUE(fields >> vcpu >> us >> std::hex >> rip) << "bad line: " << line;
    EXPECT_EQ(vcpu, 0u) << line;
    ++samples;
    kernel_samples += rip >= kKernelHalf ? 1 : 0;
  }
  // A boot takes far longer than 20 intervals of 0.5 ms, even on hardware KVM.
  EXPECT_GE(samples, 20);
  EXPECT_GE(kernel_samples, samples / 2) << "the guest boots in its kernel, not in user space";

  const ProcessOutput report = run_process({dsec::test::source_path("/tools/guest-profile"),
                                            profile.string(), "--vmlinux", image.vmlinux.string()},
                                           60s);
  ASSERT_EQ(report.exit_status, 0) << report.describe();
  EXPECT_THAT(report.out, HasSubstr(std::to_string(samples) + " samples from 1 vCPU(s)"));
  // Every kernel address of an unstripped vmlinux falls after some function's start.
  EXPECT_THAT(report.out, Not(HasSubstr("[kernel, no symbol]"))) << report.out;
  std::filesystem::remove(profile);
}

}  // namespace
}  // namespace dsec::test

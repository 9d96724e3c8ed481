// `dsec-vmm run --rng` gives the default image a virtio-rng device: the guest kernel finds
// it from the command line, makes it the current hardware RNG, and /dev/hwrng hands out
// bytes that come from the host. Without --rng the guest has no hardware RNG.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/dsec_vmm.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kBootDeadline = 180s;

// What the guest runs: which hardware RNG is current, then two reads of 64 bytes from
// /dev/hwrng as od prints them (4 lines of 16 bytes each). No double quotes: dsec.run.
constexpr const char* kCommand =
    "dsec.run=\"echo rng_current=$(cat /sys/devices/virtual/misc/hw_random/rng_current); "
    "echo read-1; head -c 64 /dev/hwrng | od -An -tx1; "
    "echo read-2; head -c 64 /dev/hwrng | od -An -tx1\"";

// The bytes of od's hex lines after `marker` and before the next non-od line.
std::vector<int> od_bytes_after(const std::string& console, const std::string& marker) {
  static const std::regex kOdLine(R"(^( [0-9a-f]{2})+$)");
  std::istringstream lines(console);
  std::vector<int> bytes;
  bool in_block = false;
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty() && l.back() == '\r') {
      l.pop_back();
    }
    if (!in_block) {
      in_block = l == marker;
      continue;
    }
    if (!std::regex_match(l, kOdLine)) {
      break;
    }
    std::istringstream hex(l);
    for (std::string byte; hex >> byte;) {
      bytes.push_back(std::stoi(byte, nullptr, 16));
    }
  }
  return bytes;
}

// What the command's `echo rng_current=...` printed: the line that starts with it (the
// banner's copy of the command line holds the same words, unexpanded).
std::optional<std::string> rng_current(const std::string& console) {
  std::istringstream lines(console);
  for (std::string l; std::getline(lines, l);) {
    if (!l.empty() && l.back() == '\r') {
      l.pop_back();
    }
    if (l.starts_with("rng_current=")) {
      return l.substr(std::string_view("rng_current=").size());
    }
  }
  return std::nullopt;
}

TEST(VirtioRng, TheGuestUsesItAsItsHardwareRngAndReadsRandomBytes) {
  if (default_image().kernel.empty()) {
    return;  // the failure says how to build it
  }
  const ProcessOutput run = run_vmm({"run", "--rng", "--append", kCommand}, kBootDeadline);
  ASSERT_EQ(run.exit_status, 0) << run.describe();

  const auto banner = find_banner(run.out);
  ASSERT_TRUE(banner.has_value()) << "no dsec-init banner on the console\n" << run.describe();
  // Slot 0 of the virtio-mmio area: 4 KiB at 3 GiB, IRQ 5 (x86_64/layout.h).
  EXPECT_THAT(banner->cmdline, HasSubstr("virtio_mmio.device=4K@0xc0000000:5"));

  const auto current = rng_current(run.out);
  ASSERT_TRUE(current.has_value()) << run.describe();
  EXPECT_THAT(*current, ::testing::StartsWith("virtio_rng")) << run.out;

  const std::vector<int> first = od_bytes_after(run.out, "read-1");
  const std::vector<int> second = od_bytes_after(run.out, "read-2");
  ASSERT_EQ(first.size(), 64u) << run.out;
  ASSERT_EQ(second.size(), 64u) << run.out;
  // 64 random bytes take fewer than 8 distinct values with negligible probability, and
  // two reads agree with probability 2^-512.
  EXPECT_GE(std::set<int>(first.begin(), first.end()).size(), 8u) << run.out;
  EXPECT_NE(first, second) << run.out;

  EXPECT_THAT(run.out, HasSubstr("dsec-init: exit status=0")) << run.out;
  EXPECT_THAT(run.err, HasSubstr("the guest rebooted")) << run.describe();
  EXPECT_THAT(run.err, Not(HasSubstr("virtio"))) << run.describe();  // no device complaints
}

TEST(VirtioRng, WithoutTheFlagTheGuestHasNoHardwareRng) {
  if (default_image().kernel.empty()) {
    return;
  }
  const ProcessOutput run = run_vmm(
      {"run", "--append",
       "dsec.run=\"echo rng_current=$(cat /sys/devices/virtual/misc/hw_random/rng_current)\""},
      kBootDeadline);
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  const auto banner = find_banner(run.out);
  ASSERT_TRUE(banner.has_value()) << run.describe();
  EXPECT_THAT(banner->cmdline, Not(HasSubstr("virtio_mmio")));
  // The hw_random core is built in: it is there, with no device behind it.
  EXPECT_EQ(rng_current(run.out), "none") << run.out;
}

}  // namespace
}  // namespace dsec::test

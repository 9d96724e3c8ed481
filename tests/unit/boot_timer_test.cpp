// The boot timer: the guest's first write to port 0x440 is its boot time, reported once.
#include "vmm/devices/legacy/boot_timer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace dsec::devices {
namespace {

using namespace std::chrono_literals;
using Clock = BootTimer::Clock;

void write_byte(BootTimer& timer, uint8_t value) {
  timer.write(0, std::span(&value, 1));
}

TEST(BootTimer, FirstWriteReportsTheTimeSinceStartOnce) {
  const auto start = Clock::now() - 50ms;  // the VMM started 50 ms ago
  std::vector<Clock::duration> reports;
  BootTimer timer(start, [&](Clock::duration since_start) { reports.push_back(since_start); });
  EXPECT_FALSE(timer.boot_time().has_value());

  const auto before = Clock::now();
  write_byte(timer, DSEC_BOOT_TIMER_VALUE);
  const auto after = Clock::now();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_GE(reports[0], before - start);
  EXPECT_LE(reports[0], after - start);
  EXPECT_EQ(timer.boot_time(), reports[0]);

  write_byte(timer, DSEC_BOOT_TIMER_VALUE);  // later writes are ignored
  write_byte(timer, 0);
  EXPECT_EQ(reports.size(), 1u);
  EXPECT_EQ(timer.boot_time(), reports[0]);
}

TEST(BootTimer, OnlyTheBootValueCountsAndReadsReturnZero) {
  BootTimer timer(Clock::now());
  std::array<uint8_t, 4> in{1, 2, 3, 4};
  timer.read(0, in);
  EXPECT_THAT(in, ::testing::ElementsAre(0, 0, 0, 0));
  EXPECT_FALSE(timer.boot_time().has_value());  // reads do not count
  timer.write(0, std::span<const uint8_t>());   // nor does an empty write
  write_byte(timer, 0x00);                      // nor another value
  write_byte(timer, 0xff);
  EXPECT_FALSE(timer.boot_time().has_value());
  const std::array<uint8_t, 2> wide{DSEC_BOOT_TIMER_VALUE, 0x00};  // a wider OUT counts too
  timer.write(0, wide);
  EXPECT_TRUE(timer.boot_time().has_value());
  EXPECT_FALSE(timer.shutdown_announced());
}

TEST(BootTimer, ShutdownValueAnnouncesACleanRebootWithoutCountingAsBoot) {
  BootTimer timer(Clock::now());
  EXPECT_FALSE(timer.shutdown_announced());
  write_byte(timer, DSEC_BOOT_TIMER_SHUTDOWN_VALUE);
  EXPECT_TRUE(timer.shutdown_announced());
  EXPECT_FALSE(timer.boot_time().has_value());
}

TEST(BootTimer, RacingVcpusCountOnce) {
  std::atomic<int> reports{0};
  BootTimer timer(Clock::now(), [&](Clock::duration) { reports.fetch_add(1); });
  constexpr int kVcpus = 8;
  std::vector<std::thread> vcpus;
  vcpus.reserve(kVcpus);
  for (int i = 0; i < kVcpus; ++i) {
    vcpus.emplace_back([&timer] {
      for (int j = 0; j < 1000; ++j) {
        write_byte(timer, DSEC_BOOT_TIMER_VALUE);
      }
    });
  }
  for (auto& vcpu : vcpus) {
    vcpu.join();
  }
  EXPECT_EQ(reports.load(), 1);
}

}  // namespace
}  // namespace dsec::devices

// The guest profiler without KVM: its thread kicks at the interval until stopped, samples
// carry their vCPU and time, the file has the documented format, and validate() refuses a
// profile that could not be written or an interval out of range before anything starts.
#include "vmm/machine/guest_profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "vmm/machine/machine_config.h"

namespace dsec::machine {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Polls `done` for up to 10 s (a loaded CI machine is slow, never that slow).
template <typename F>
bool eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(GuestProfiler, KicksRepeatedlyAfterStartAndNeverAfterStop) {
  std::atomic<int> kicks{0};
  GuestProfiler profiler(1ms, [&] { kicks.fetch_add(1); });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(kicks.load(), 0) << "kicked before start()";

  profiler.start();
  ASSERT_TRUE(eventually([&] { return kicks.load() >= 5; })) << kicks.load() << " kicks in 10 s";
  profiler.stop();
  const int at_stop = kicks.load();
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(kicks.load(), at_stop) << "kicked after stop()";
  profiler.stop();  // idempotent
}

TEST(GuestProfiler, ALongIntervalDoesNotDelayStop) {
  GuestProfiler profiler(GuestProfiler::kMaxInterval, [] {});
  profiler.start();
  const auto before = std::chrono::steady_clock::now();
  profiler.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 500ms);
}

TEST(GuestProfiler, SamplesKeepTheirVcpuRipAndOrderOfArrival) {
  GuestProfiler profiler(1s, [] {});
  profiler.start();
  profiler.record(0, 0xffffffff81000000);
  std::this_thread::sleep_for(2ms);
  profiler.record(1, 0x401000);
  profiler.stop();
  const auto samples = profiler.samples();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].vcpu, 0u);
  EXPECT_EQ(samples[0].rip, 0xffffffff81000000u);
  EXPECT_EQ(samples[1].vcpu, 1u);
  EXPECT_EQ(samples[1].rip, 0x401000u);
  EXPECT_GE(samples[1].since_start - samples[0].since_start, 2ms);
}

TEST(GuestProfiler, WritesAHeaderThenOneLinePerSample) {
  const auto path =
      std::filesystem::temp_directory_path() / ("dsec-profile-test-" + std::to_string(::getpid()));
  const std::vector<GuestProfiler::Sample> samples = {
      {.vcpu = 0, .since_start = 1500us, .rip = 0xffffffff81234567},
      {.vcpu = 1, .since_start = 2s, .rip = 0x7f00deadbeef},
  };
  ASSERT_OK(GuestProfiler::write(path.string(), samples, 250us));
  EXPECT_EQ(test::file_text(path),
            "# dsec-vmm guest profile: 2 samples, one every 250 us per vCPU\n"
            "# vcpu microseconds_since_start rip\n"
            "0 1500 ffffffff81234567\n"
            "1 2000000 7f00deadbeef\n");
  std::filesystem::remove(path);
}

TEST(GuestProfiler, WriteToAMissingDirectorySaysWhatToDo) {
  const auto written = GuestProfiler::write("/nonexistent-dir/profile.txt", {}, 1ms);
  ASSERT_FALSE(written.has_value());
  EXPECT_THAT(written.error().message(), HasSubstr("/nonexistent-dir/profile.txt"));
  EXPECT_THAT(written.error().message(), HasSubstr("--profile-guest"));
}

MachineConfig profiled_config(std::string path, std::chrono::microseconds interval) {
  MachineConfig config;
  config.kernel_path = dsec::test::source_path("/CMakeLists.txt");  // any regular file
  config.guest_profile_path = std::move(path);
  config.guest_profile_interval = interval;
  return config;
}

TEST(GuestProfilerConfig, ValidateChecksTheDirectoryAndTheInterval) {
  const std::string writable = std::filesystem::temp_directory_path() / "profile.txt";
  ASSERT_OK(validate(profiled_config(writable, 1ms)));
  ASSERT_OK(validate(profiled_config("relative-profile.txt", 1ms)));  // the working directory

  const auto missing = validate(profiled_config("/nonexistent-dir/profile.txt", 1ms));
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message(), HasSubstr("/nonexistent-dir"));

  const auto too_short = validate(profiled_config(writable, 10us));
  ASSERT_FALSE(too_short.has_value());
  EXPECT_THAT(too_short.error().message(), HasSubstr("--profile-interval-us 10"));
  EXPECT_FALSE(validate(profiled_config(writable, 2s)).has_value());
  // No profile asked for: the interval is not looked at.
  ASSERT_OK(validate(profiled_config("", 0us)));
}

}  // namespace
}  // namespace dsec::machine

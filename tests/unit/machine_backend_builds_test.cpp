// A fresh VMM's backend (`serve --api-sock`): the VM a boot asks for is built by the thread
// in run_builds(), never by the API thread that asked, and a stop answers a boot that no
// thread will build.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "vmm/api/machine_backend.h"

namespace dsec {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

api::MachineBackend::LoadSettings settings_without_seccomp() {
  api::MachineBackend::LoadSettings settings;
  settings.host.seccomp.mode = seccomp::Mode::kOff;
  return settings;
}

machine::MachineConfig missing_kernel() {
  machine::MachineConfig guest;
  guest.kernel_path = "/nonexistent/dsec-test-bzImage";
  return guest;
}

TEST(MachineBackendBuildsTest, AFailedBuildAnswersItsBootAndTheBuilderWaitsForTheNext) {
  api::MachineBackend backend(settings_without_seccomp());
  auto builder = std::async(std::launch::async, [&backend] { return backend.run_builds(); });

  for (int attempt = 0; attempt < 2; ++attempt) {
    const Status booted = backend.boot(missing_kernel());
    ASSERT_FALSE(booted.has_value()) << "attempt " << attempt;
    EXPECT_THAT(booted.error().message(), HasSubstr("InstanceStart"));
    EXPECT_THAT(booted.error().message(), HasSubstr("/nonexistent/dsec-test-bzImage"));
    EXPECT_EQ(builder.wait_for(0s), std::future_status::timeout)
        << "run_builds() returned after a build that failed";
  }
  EXPECT_EQ(backend.vm(), nullptr);

  backend.stop("the test ends");
  ASSERT_EQ(builder.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(builder.get(), nullptr);
  const Status after_stop = backend.boot(missing_kernel());
  ASSERT_FALSE(after_stop.has_value());
  EXPECT_THAT(after_stop.error().message(), HasSubstr("stopping"));
}

TEST(MachineBackendBuildsTest, AStopAnswersABootThatNoThreadBuilds) {
  api::MachineBackend backend(settings_without_seccomp());
  auto boot = std::async(std::launch::async, [&backend] { return backend.boot(missing_kernel()); });
  // No thread runs run_builds(): the boot waits for one.
  EXPECT_EQ(boot.wait_for(200ms), std::future_status::timeout);
  backend.stop("the test ends");
  ASSERT_EQ(boot.wait_for(10s), std::future_status::ready) << "the boot still waits";
  const Status booted = boot.get();
  ASSERT_FALSE(booted.has_value());
  EXPECT_THAT(booted.error().message(), HasSubstr("stopping"));
  EXPECT_EQ(backend.run_builds(), nullptr);
}

// A load is built only by run_builds(): without that thread its answer waits.
TEST(MachineBackendBuildsTest, ALoadIsAnsweredOnlyOnceRunBuildsRanIt) {
  api::MachineBackend backend(settings_without_seccomp());
  api::SnapshotLoadRequest request;
  request.snapshot_path = "/nonexistent/dsec-test-state";
  request.mem_file_path = "/nonexistent/dsec-test-memory";
  auto load = std::async(std::launch::async, [&] { return backend.load_snapshot(request); });
  EXPECT_EQ(load.wait_for(200ms), std::future_status::timeout)
      << "the load was answered with no thread in run_builds()";
  auto builder = std::async(std::launch::async, [&backend] { return backend.run_builds(); });
  ASSERT_EQ(load.wait_for(10s), std::future_status::ready);
  const Status loaded = load.get();
  ASSERT_FALSE(loaded.has_value());
  EXPECT_THAT(loaded.error().message(), HasSubstr("snapshot load"));
  EXPECT_THAT(loaded.error().message(), HasSubstr("/nonexistent/dsec-test-state"));
  backend.stop("the test ends");
  ASSERT_EQ(builder.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(builder.get(), nullptr);
}

}  // namespace
}  // namespace dsec

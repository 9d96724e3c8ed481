// `dsec-vmm run` with a configuration it cannot boot: a file that is no kernel, a truncated
// bzImage or vmlinux, an initrd too big for the memory, a vCPU count out of range. Each
// must end at once with exit status 1 and a message on stderr that names what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "tests/support/dsec_vmm.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Nothing boots, so the answer comes before any guest runs; a run still going at this
// deadline has started a guest it should have refused (or hung) and fails the test.
constexpr auto kConfigErrorDeadline = 30s;

void write_bytes(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out) << "cannot write " << path;
}

std::vector<char> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs dsec-vmm, expecting the refusal: exit status 1, nothing on the console, and stderr
// holding each of `expected`.
void expect_refused(const std::vector<std::string>& args,
                    const std::vector<std::string>& expected) {
  const ProcessOutput run = run_vmm(args, kConfigErrorDeadline);
  ASSERT_FALSE(run.timed_out) << run.describe();
  EXPECT_EQ(run.exit_status, 1) << run.describe();
  for (const auto& text : expected) {
    EXPECT_THAT(run.err, HasSubstr(text)) << run.describe();
  }
  EXPECT_THAT(run.out, ::testing::IsEmpty()) << run.describe();
}

TEST(RunConfigErrors, RandomBytesAsTheKernelAreRefusedNamingTheFile) {
  TempDir tmp;
  const auto kernel = tmp.file("garbage-kernel");
  const auto initrd = tmp.file("initrd");
  std::mt19937 random(20240601);  // fixed: the same bytes every run
  std::vector<char> bytes(64 * 1024);
  for (auto& b : bytes) {
    b = static_cast<char>(random());
  }
  write_bytes(kernel, bytes);
  write_bytes(initrd, {'0', '7', '0', '7', '0', '1'});
  expect_refused({"run", "--kernel", kernel.string(), "--initrd", initrd.string()},
                 {kernel.string(), "not a bzImage or ELF vmlinux"});
}

TEST(RunConfigErrors, BzImageCutAfterFourKibIsRefusedNamingTheFile) {
  const DefaultImage image = default_image();
  if (image.kernel.empty()) return;  // the failure says how to build it
  TempDir tmp;
  const auto kernel = tmp.file("bzImage-4k");
  std::vector<char> bytes = read_bytes(image.kernel);
  ASSERT_GT(bytes.size(), 4096u);
  bytes.resize(4096);
  write_bytes(kernel, bytes);
  expect_refused({"run", "--kernel", kernel.string(), "--initrd", image.initrd.string()},
                 {kernel.string(), "bzImage"});
}

TEST(RunConfigErrors, BzImageCutInTheMiddleIsRefusedNamingTheFile) {
  const DefaultImage image = default_image();
  if (image.kernel.empty()) {
    return;
  }
  TempDir tmp;
  const auto kernel = tmp.file("bzImage-half");
  std::vector<char> bytes = read_bytes(image.kernel);
  bytes.resize(bytes.size() / 2);
  write_bytes(kernel, bytes);
  expect_refused({"run", "--kernel", kernel.string(), "--initrd", image.initrd.string()},
                 {kernel.string(), "bzImage", "truncated"});
}

TEST(RunConfigErrors, ElfVmlinuxCutInTheMiddleIsRefusedNamingTheFile) {
  const DefaultImage image = default_image();
  if (image.vmlinux.empty()) {
    return;
  }
  TempDir tmp;
  const auto kernel = tmp.file("vmlinux-half");
  std::vector<char> bytes = read_bytes(image.vmlinux);
  bytes.resize(bytes.size() / 2);
  write_bytes(kernel, bytes);
  expect_refused({"run", "--kernel", kernel.string(), "--initrd", image.initrd.string()},
                 {kernel.string(), "ELF vmlinux", "beyond the end"});
}

TEST(RunConfigErrors, InitrdLargerThanTheRoomLeftIsRefusedNamingTheFile) {
  const DefaultImage image = default_image();
  if (image.kernel.empty()) {
    return;
  }
  TempDir tmp;
  // 24 MiB (sparse) with 32 MiB of RAM: smaller than the memory, but the kernel claims
  // about 18 MiB from 1 MiB up (its init_size), so it cannot fit.
  const auto initrd = tmp.file("big-initrd");
  { std::ofstream create(initrd); }
  std::filesystem::resize_file(initrd, 24ull << 20);
  expect_refused(
      {"run", "--kernel", image.kernel.string(), "--initrd", initrd.string(), "--memory", "32"},
      {initrd.string(), "does not fit in 32 MiB"});
}

TEST(RunConfigErrors, VcpuCountsOutOfRangeAreRefused) {
  const DefaultImage image = default_image();
  if (image.kernel.empty()) {
    return;
  }
  for (const std::string vcpus : {"0", "999"}) {
    SCOPED_TRACE("--vcpus " + vcpus);
    expect_refused({"run", "--kernel", image.kernel.string(), "--initrd", image.initrd.string(),
                    "--vcpus", vcpus},
                   {"--vcpus " + vcpus, "out of range"});
  }
}

}  // namespace
}  // namespace dsec::test

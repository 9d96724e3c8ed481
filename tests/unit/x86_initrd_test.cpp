// Initrd placement: as high as allowed, page-aligned, clear of the kernel, or a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/unit/x86_kernel_images.h"
#include "vmm/arch/x86_64/initrd.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {
namespace {

using test::pattern;
using ::testing::AllOf;
using ::testing::HasSubstr;

GuestMemory make_memory(uint64_t bytes) {
  return std::move(GuestMemory::anonymous(ram_regions(bytes).value()).value());
}

LoadedKernel kernel_at_one_mib(uint64_t size, uint64_t initrd_addr_max = 0x7fffffff) {
  LoadedKernel kernel;
  kernel.extent = {kMiB, size};
  kernel.initrd_addr_max = initrd_addr_max;
  return kernel;
}

TEST(X86Initrd, GoesAtTheHighestPageAlignedAddressInRam) {
  GuestMemory memory = make_memory(64 * kMiB);
  const auto bytes = pattern(0x12345, 4);
  ASSERT_OK_AND_ASSIGN(const GuestRange range,
                       load_initrd(memory, kernel_at_one_mib(8 * kMiB), bytes));
  EXPECT_EQ(range.base, (64 * kMiB - 0x12345) & ~(kPageSize - 1));
  EXPECT_EQ(range.size, bytes.size());
  std::vector<uint8_t> copied(bytes.size());
  ASSERT_OK(memory.read(range.base, copied));
  EXPECT_EQ(copied, bytes);
}

TEST(X86Initrd, StaysBelowTheKernelsInitrdAddrMax) {
  GuestMemory memory = make_memory(256 * kMiB);
  ASSERT_OK_AND_ASSIGN(const GuestRange range,
                       place_initrd(memory, kernel_at_one_mib(8 * kMiB, 32 * kMiB - 1), 0x3000));
  EXPECT_EQ(range.base, 32 * kMiB - 0x3000);
  EXPECT_LE(range.end(), 32 * kMiB);
}

TEST(X86Initrd, StaysBelowTheMmioGapWhenRamContinuesAboveIt) {
  GuestMemory memory = make_memory(5 * kGiB);
  ASSERT_OK_AND_ASSIGN(const GuestRange range,
                       place_initrd(memory, kernel_at_one_mib(8 * kMiB, UINT32_MAX), 0x1000));
  EXPECT_EQ(range.base, kMmioGapStart - 0x1000);
  ASSERT_OK_AND_ASSIGN(const GuestRange below_2g,
                       place_initrd(memory, kernel_at_one_mib(8 * kMiB), 0x1000));
  EXPECT_EQ(below_2g.base, 2 * kGiB - 0x1000);
}

TEST(X86Initrd, TooBigForMemoryIsAClearError) {
  GuestMemory memory = make_memory(64 * kMiB);
  const auto range = place_initrd(memory, kernel_at_one_mib(8 * kMiB), 70 * kMiB);
  ASSERT_FALSE(range.has_value());
  EXPECT_THAT(range.error().message(),
              AllOf(HasSubstr("initrd of 70 MiB does not fit in 64 MiB of guest memory"),
                    HasSubstr("give the VM more memory")));
}

TEST(X86Initrd, InitrdThatWouldOverlapTheKernelIsRefused) {
  GuestMemory memory = make_memory(64 * kMiB);
  // 60 MiB fits in RAM but not between the kernel's end (1 MiB + 8 MiB) and 64 MiB.
  const auto range = place_initrd(memory, kernel_at_one_mib(8 * kMiB), 60 * kMiB);
  ASSERT_FALSE(range.has_value());
  EXPECT_THAT(range.error().message(), HasSubstr("initrd of 60 MiB does not fit"));
  // 55 MiB does.
  ASSERT_OK_AND_ASSIGN(const GuestRange fits,
                       place_initrd(memory, kernel_at_one_mib(8 * kMiB), 55 * kMiB));
  EXPECT_GE(fits.base, 9 * kMiB);
}

TEST(X86Initrd, EmptyInitrdIsRefused) {
  GuestMemory memory = make_memory(64 * kMiB);
  EXPECT_THAT(place_initrd(memory, kernel_at_one_mib(kMiB), 0).error().message(),
              HasSubstr("empty"));
}

TEST(X86Initrd, FileIsReadStraightIntoGuestMemory) {
  GuestMemory memory = make_memory(64 * kMiB);
  const std::string path = ::testing::TempDir() + "x86_initrd_test.cpio";
  const auto bytes = pattern(10000, 7);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  ASSERT_OK_AND_ASSIGN(const GuestRange range,
                       load_initrd_file(memory, kernel_at_one_mib(8 * kMiB), path));
  std::vector<uint8_t> copied(bytes.size());
  ASSERT_OK(memory.read(range.base, copied));
  EXPECT_EQ(copied, bytes);

  GuestMemory small = make_memory(4 * kMiB);
  const auto too_big = load_initrd_file(small, kernel_at_one_mib(3 * kMiB), path);
  ASSERT_FALSE(too_big.has_value());
  EXPECT_THAT(too_big.error().message(), HasSubstr(path + ": initrd of 1 MiB does not fit"));
  std::remove(path.c_str());

  const auto missing = load_initrd_file(memory, kernel_at_one_mib(kMiB), "/nonexistent/initrd");
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message(), HasSubstr("/nonexistent/initrd"));
}

// The plan places the file and holds it open; its write reads it into guest memory.
TEST(X86Initrd, APlanReadsNothingUntilItsWriteRuns) {
  GuestMemory memory = make_memory(64 * kMiB);
  const std::string path = ::testing::TempDir() + "x86_initrd_planned.cpio";
  const auto bytes = pattern(5000, 3);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  ASSERT_OK_AND_ASSIGN(const PlannedInitrd planned,
                       plan_initrd_file(memory, kernel_at_one_mib(8 * kMiB), path));
  std::remove(path.c_str());
  EXPECT_EQ(planned.range.size, bytes.size());
  std::vector<uint8_t> copied(bytes.size());
  ASSERT_OK(memory.read(planned.range.base, copied));
  EXPECT_EQ(copied, std::vector<uint8_t>(bytes.size(), 0));
  ASSERT_OK(planned.write(memory));
  ASSERT_OK(memory.read(planned.range.base, copied));
  EXPECT_EQ(copied, bytes);
}

// A file cut short between the plan and the write (replaced while the VMM started) is an
// error of the write, which names the file; the VMM then gives up the VM.
TEST(X86Initrd, AFileTruncatedAfterItsPlanFailsTheWrite) {
  GuestMemory memory = make_memory(64 * kMiB);
  const std::string path = ::testing::TempDir() + "x86_initrd_truncated.cpio";
  const auto bytes = pattern(5000, 4);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  ASSERT_OK_AND_ASSIGN(const PlannedInitrd planned,
                       plan_initrd_file(memory, kernel_at_one_mib(8 * kMiB), path));
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
  const auto written = planned.write(memory);
  std::remove(path.c_str());
  ASSERT_FALSE(written.has_value());
  EXPECT_THAT(written.error().message(), HasSubstr(path + ": file ended after 1000 of 5000 bytes"));
}

}  // namespace
}  // namespace dsec::x86_64

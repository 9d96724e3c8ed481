// The snapshot memory file: the guest's RAM back to back, zero pages left as holes, and a
// file of the wrong size refused before it is mapped.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/snapshot/memory_file.h"

namespace dsec::snapshot {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kPage = 4096;

// 2 MiB low and 1 MiB above 4 GiB, given high first: the file holds them in guest order.
const std::array<GuestRange, 2> kRanges{{{0x100000000, kMiB}, {0, 2 * kMiB}}};

// A few non-zero pages: a run of three, single pages at the ends of both regions, and a page
// whose only non-zero byte is its last.
GuestMemory memory_with_some_pages() {
  GuestMemory memory = std::move(GuestMemory::anonymous(kRanges).value());
  EXPECT_TRUE(memory.fill(0, kPage, 0x11).has_value());
  EXPECT_TRUE(memory.fill(5 * kPage, 3 * kPage, 0x22).has_value());
  EXPECT_TRUE(memory.fill(2 * kMiB - kPage, kPage, 0x33).has_value());
  EXPECT_TRUE(memory.write_obj<uint8_t>(0x100000000 + kPage - 1, 0x44).has_value());
  EXPECT_TRUE(memory.fill(0x100000000 + kMiB - kPage, kPage, 0x55).has_value());
  return memory;
}

// The RAM's bytes as the file must hold them.
std::string expected_file(const GuestMemory& memory) {
  std::string bytes;
  for (const GuestRegion& region : memory.regions()) {
    bytes.append(reinterpret_cast<const char*>(region.host()), region.size());
  }
  return bytes;
}

TEST(SnapshotMemoryFile, HoldsTheRamBackToBackWithZeroPagesAsHoles) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  const GuestMemory memory = memory_with_some_pages();
  ASSERT_OK_AND_ASSIGN(const MemoryFileFigures figures, write_memory_file(path, memory));
  EXPECT_EQ(figures.ram_bytes, 3 * kMiB);
  EXPECT_EQ(figures.written_bytes, 7 * kPage);
  EXPECT_THAT(dir.entries(), ElementsAre("memory"));

  const std::string bytes = test::file_text(path);
  ASSERT_EQ(bytes.size(), 3 * kMiB);
  EXPECT_TRUE(bytes == expected_file(memory));
  EXPECT_EQ(bytes[0], 0x11);
  EXPECT_EQ(bytes[2 * kMiB + kPage - 1], 0x44);  // the high region follows the low one
  EXPECT_EQ(bytes[3 * kMiB - 1], 0x55);

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 3 * kMiB);
  // Seven pages of data; file systems allocate in blocks of up to 64 KiB or so.
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 512 * 1024u) << st.st_blocks;
}

TEST(SnapshotMemoryFile, AllZeroRamMakesAFileWithNoData) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  const std::array<GuestRange, 1> ranges{{{0, 64 * kMiB}}};
  ASSERT_OK_AND_ASSIGN(const GuestMemory memory, GuestMemory::anonymous(ranges));
  ASSERT_OK_AND_ASSIGN(const MemoryFileFigures figures, write_memory_file(path, memory));
  EXPECT_EQ(figures.ram_bytes, 64 * kMiB);
  EXPECT_EQ(figures.written_bytes, 0u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 64 * kMiB);
  EXPECT_EQ(st.st_blocks, 0);
}

TEST(SnapshotMemoryFile, ReadBackThroughACopyOnWriteMapping) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  const GuestMemory memory = memory_with_some_pages();
  ASSERT_OK(write_memory_file(path, memory));
  ASSERT_OK_AND_ASSIGN(const UniqueFd fd, open_memory_file(path, memory.total_size()));
  ASSERT_OK_AND_ASSIGN(const GuestMemory restored, GuestMemory::private_file(kRanges, fd.get()));
  ASSERT_EQ(restored.regions().size(), 2u);
  EXPECT_TRUE(expected_file(restored) == expected_file(memory));
}

TEST(SnapshotMemoryFile, AWriteReplacesThePreviousFileWhole) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  GuestMemory memory = memory_with_some_pages();
  ASSERT_OK(write_memory_file(path, memory));
  ASSERT_OK(memory.fill(0, kPage, 0));
  ASSERT_OK(memory.fill(kMiB, kPage, 0x66));
  ASSERT_OK(write_memory_file(path, memory));
  EXPECT_TRUE(test::file_text(path) == expected_file(memory));
  EXPECT_THAT(dir.entries(), ElementsAre("memory"));
  const auto no_directory = write_memory_file(dir.file("missing/memory"), memory);
  ASSERT_FALSE(no_directory.has_value());
  EXPECT_THAT(no_directory.error().message(), HasSubstr(dir.file("missing/memory")));
}

TEST(SnapshotMemoryFile, AFileOfTheWrongSizeIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  const GuestMemory memory = memory_with_some_pages();
  ASSERT_OK(write_memory_file(path, memory));

  ASSERT_EQ(::truncate(path.c_str(), 3 * kMiB - kPage), 0);
  const auto shorter = open_memory_file(path, 3 * kMiB);
  ASSERT_FALSE(shorter.has_value());
  EXPECT_EQ(shorter.error().message(),
            path +
                ": the snapshot's memory file is 3141632 bytes, but its state file gives the "
                "guest 3145728 bytes of RAM (the memory file is truncated); give the memory file "
                "written with this state file, or take the snapshot again");

  ASSERT_EQ(::truncate(path.c_str(), 3 * kMiB + kPage), 0);
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const Status longer = check_memory_file(fd.get(), 3 * kMiB);
  ASSERT_FALSE(longer.has_value());
  EXPECT_THAT(longer.error().message(), HasSubstr("(the memory file is from another snapshot)"));

  const auto directory = open_memory_file(dir.path().string(), 3 * kMiB);
  ASSERT_FALSE(directory.has_value());
  EXPECT_THAT(directory.error().message(), HasSubstr("is not a regular file"));
  const auto missing = open_memory_file(dir.file("absent"), 3 * kMiB);
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message(),
              HasSubstr("cannot open the snapshot's memory file " + dir.file("absent").string()));
}

}  // namespace
}  // namespace dsec::snapshot

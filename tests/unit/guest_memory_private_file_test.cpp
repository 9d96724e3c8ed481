// GuestMemory::private_file: guest RAM mapped copy-on-write from a snapshot's memory file.
// Each VM sees its own writes only, the file never changes, and a file of the wrong size is
// refused before anything is mapped.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/common/unique_fd.h"
#include "vmm/memory/guest_memory.h"

namespace dsec {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kPage = 4096;
constexpr uint64_t k2MiB = 2 * kMiB;

// 4 MiB low, and 2 MiB + 12 KiB above 4 GiB.
const std::array<GuestRange, 2> kRanges{{{0, 4 * kMiB}, {0x100000000, k2MiB + 3 * kPage}}};
constexpr uint64_t kTotal = 6 * kMiB + 3 * kPage;

// A file whose every page starts with its own file offset.
std::string write_numbered_file(const std::string& path, uint64_t size) {
  std::string bytes(size, '\0');
  for (uint64_t offset = 0; offset < size; offset += kPage) {
    std::memcpy(bytes.data() + offset, &offset, sizeof(offset));
  }
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(size));
  return bytes;
}

TEST(GuestMemoryPrivateFile, ReadsTheFileBackToBackInGuestOrder) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  write_numbered_file(path, kTotal);
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  // Given high range first: offsets still follow guest-physical order.
  const std::array<GuestRange, 2> reversed{kRanges[1], kRanges[0]};
  ASSERT_OK_AND_ASSIGN(const GuestMemory memory, GuestMemory::private_file(reversed, fd.get()));
  EXPECT_EQ(memory.total_size(), kTotal);
  ASSERT_OK_AND_ASSIGN(const uint64_t low, memory.read_obj<uint64_t>(3 * kPage));
  EXPECT_EQ(low, 3 * kPage);
  ASSERT_OK_AND_ASSIGN(const uint64_t high, memory.read_obj<uint64_t>(0x100000000 + 2 * kPage));
  EXPECT_EQ(high, 4 * kMiB + 2 * kPage);
  ASSERT_OK_AND_ASSIGN(const uint64_t last,
                       memory.read_obj<uint64_t>(0x100000000 + k2MiB + 2 * kPage));
  EXPECT_EQ(last, kTotal - kPage);
}

TEST(GuestMemoryPrivateFile, EachMappingSeesOnlyItsOwnWritesAndTheFileNeverChanges) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  const std::string original = write_numbered_file(path, kTotal);
  GuestMemory first = [&] {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return std::move(GuestMemory::private_file(kRanges, fd.get()).value());
  }();  // the fd is closed: the mapping holds the file
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_OK_AND_ASSIGN(GuestMemory second, GuestMemory::private_file(kRanges, fd.get()));

  ASSERT_OK(first.write_obj<uint64_t>(kPage + 8, 0x1111111111111111));
  ASSERT_OK(second.write_obj<uint64_t>(kPage + 8, 0x2222222222222222));
  ASSERT_OK(first.fill(0x100000000, k2MiB, 0xaa));

  EXPECT_EQ(first.read_obj<uint64_t>(kPage + 8).value(), 0x1111111111111111u);
  EXPECT_EQ(second.read_obj<uint64_t>(kPage + 8).value(), 0x2222222222222222u);
  EXPECT_EQ(first.read_obj<uint64_t>(kPage).value(), kPage);  // the rest of the page is the file's
  EXPECT_EQ(second.read_obj<uint8_t>(0x100000000 + 100).value(), 0);
  EXPECT_EQ(second.read_obj<uint64_t>(0x100000000).value(), 4 * kMiB);
  EXPECT_EQ(first.read_obj<uint64_t>(0x100000000 + k2MiB).value(), 6 * kMiB);
  EXPECT_TRUE(test::file_text(path) == original);
}

TEST(GuestMemoryPrivateFile, HostAddressesAre2MibAligned) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  write_numbered_file(path, kTotal);
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(const GuestMemory memory, GuestMemory::private_file(kRanges, fd.get()));
    for (const GuestRegion& region : memory.regions()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(region.host()) % k2MiB, 0u) << region.gpa();
    }
  }
}

TEST(GuestMemoryPrivateFile, AFileOfTheWrongSizeIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  for (const uint64_t size : {kTotal - kPage, kTotal + kPage, uint64_t{0}}) {
    write_numbered_file(path, size);
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    const auto memory = GuestMemory::private_file(kRanges, fd.get());
    ASSERT_FALSE(memory.has_value()) << size;
    EXPECT_EQ(memory.error().message(),
              "the guest memory file is " + std::to_string(size) +
                  " bytes, but the guest's RAM is 6303744 bytes; the memory file does not belong "
                  "to this snapshot, or was truncated: take the snapshot again");
  }
  const UniqueFd directory(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const auto memory = GuestMemory::private_file(kRanges, directory.get());
  ASSERT_FALSE(memory.has_value());
  EXPECT_THAT(memory.error().message(), HasSubstr("not a regular file"));
  EXPECT_FALSE(GuestMemory::private_file(kRanges, -1).has_value());
}

TEST(GuestMemoryPrivateFile, MappingsLiveExactlyAsLongAsTheirOwner) {
  test::TempDir dir;
  const std::string path = dir.file("memory");
  write_numbered_file(path, kTotal);
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const uint8_t* host = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(const GuestMemory memory, GuestMemory::private_file(kRanges, fd.get()));
    host = memory.regions()[0].host();
    unsigned char resident = 0;
    EXPECT_EQ(::mincore(const_cast<uint8_t*>(host), kPage, &resident), 0);
  }
  unsigned char resident = 0;
  EXPECT_EQ(::mincore(const_cast<uint8_t*>(host), kPage, &resident), -1);
  EXPECT_EQ(errno, ENOMEM);
}

}  // namespace
}  // namespace dsec

// A chain's buffers as one stream of bytes: slicing at byte offsets, copies that cross
// buffer boundaries land where the stream says, and buffers that are too short or outside
// guest memory fail instead of being read or written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/devices/virtio/chain_buffers.h"

namespace dsec::virtio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kRamEnd = 1 << 20;  // guest RAM is [0, 1 MiB)

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, kRamEnd}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

std::vector<uint8_t> bytes_at(const GuestMemory& memory, uint64_t gpa, size_t len) {
  std::vector<uint8_t> out(len);
  EXPECT_TRUE(memory.read(gpa, out).has_value());
  return out;
}

TEST(SliceBuffers, CutsAStreamOfBuffersAtByteOffsets) {
  const std::vector<GuestRange> buffers{{0x100, 10}, {0x200, 0}, {0x300, 20}};
  EXPECT_THAT(slice_buffers(buffers, 0, 30),
              ElementsAre(GuestRange{0x100, 10}, GuestRange{0x300, 20}));
  EXPECT_THAT(slice_buffers(buffers, 5, 10),
              ElementsAre(GuestRange{0x105, 5}, GuestRange{0x300, 5}));
  EXPECT_THAT(slice_buffers(buffers, 10, 3), ElementsAre(GuestRange{0x300, 3}));
  EXPECT_TRUE(slice_buffers(buffers, 30, 0).empty());
}

TEST(SliceBuffers, ClipsAtTheStreamsEnd) {
  const std::vector<GuestRange> buffers{{0x100, 10}, {0x300, 20}};
  EXPECT_THAT(slice_buffers(buffers, 8), ElementsAre(GuestRange{0x108, 2}, GuestRange{0x300, 20}));
  EXPECT_THAT(slice_buffers(buffers, 25, 100), ElementsAre(GuestRange{0x30f, 5}));
  EXPECT_TRUE(slice_buffers(buffers, 30).empty());
  EXPECT_TRUE(slice_buffers(buffers, UINT64_MAX, UINT64_MAX).empty());
}

TEST(ChainBuffers, WritesAndReadsAcrossBufferBoundaries) {
  GuestMemory memory = make_memory();
  const std::vector<GuestRange> buffers{{0x1000, 3}, {0x2000, 0}, {0x3000, 4}, {0x4000, 8}};
  const std::array<uint8_t, 9> data{1, 2, 3, 4, 5, 6, 7, 8, 9};
  ASSERT_OK(write_buffers(memory, buffers, data));

  EXPECT_THAT(bytes_at(memory, 0x1000, 3), ElementsAre(1, 2, 3));
  EXPECT_THAT(bytes_at(memory, 0x3000, 4), ElementsAre(4, 5, 6, 7));
  // Only the two bytes the data reached in the last buffer; the rest stays as it was.
  EXPECT_THAT(bytes_at(memory, 0x4000, 3), ElementsAre(8, 9, 0));

  std::array<uint8_t, 9> back{};
  ASSERT_OK(read_buffers(memory, buffers, back));
  EXPECT_EQ(back, data);
  // From an offset: the slice's stream starts mid-buffer.
  std::array<uint8_t, 4> middle{};
  ASSERT_OK(read_buffers(memory, slice_buffers(buffers, 2), middle));
  EXPECT_THAT(middle, ElementsAre(3, 4, 5, 6));
}

TEST(ChainBuffers, RefusesBuffersShorterThanTheData) {
  GuestMemory memory = make_memory();
  const std::vector<GuestRange> buffers{{0x1000, 2}, {0x2000, 2}};
  const std::array<uint8_t, 5> data{1, 2, 3, 4, 5};
  auto written = write_buffers(memory, buffers, data);
  ASSERT_FALSE(written.has_value());
  EXPECT_THAT(written.error().message(), HasSubstr("hold 4 bytes, fewer than the 5"));
  std::array<uint8_t, 5> out{};
  auto read = read_buffers(memory, buffers, out);
  ASSERT_FALSE(read.has_value());
  EXPECT_THAT(read.error().message(), HasSubstr("hold 4 bytes, fewer than the 5"));
}

TEST(ChainBuffers, RefusesBuffersOutsideGuestMemory) {
  GuestMemory memory = make_memory();
  const std::vector<GuestRange> buffers{{0x1000, 2}, {kRamEnd - 1, 2}};
  const std::array<uint8_t, 4> data{1, 2, 3, 4};
  EXPECT_FALSE(write_buffers(memory, buffers, data).has_value());
  std::array<uint8_t, 4> out{};
  EXPECT_FALSE(read_buffers(memory, buffers, out).has_value());
  EXPECT_FALSE(host_iovecs(memory, buffers).has_value());
}

TEST(ChainBuffers, HostIovecsPointIntoGuestMemoryInOrder) {
  GuestMemory memory = make_memory();
  const std::vector<GuestRange> buffers{{0x3000, 16}, {0x1000, 0}, {0x1000, 8}};
  ASSERT_OK_AND_ASSIGN(const std::vector<iovec> iovecs, host_iovecs(memory, buffers));
  ASSERT_EQ(iovecs.size(), 2u);  // the empty buffer gives none
  EXPECT_EQ(iovecs[0].iov_base, memory.host_address(0x3000).value());
  EXPECT_EQ(iovecs[0].iov_len, 16u);
  EXPECT_EQ(iovecs[1].iov_base, memory.host_address(0x1000).value());
  EXPECT_EQ(iovecs[1].iov_len, 8u);
}

}  // namespace
}  // namespace dsec::virtio

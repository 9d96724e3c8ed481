// GuestMemory: the one way the VMM touches guest RAM refuses every range that is not
// wholly inside one region.
#include "vmm/memory/guest_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "tests/support/result_matchers.h"

namespace dsec {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

// True if the host page holding `address` is mapped.
bool is_mapped(const void* address) {
  unsigned char residency = 0;
  auto* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(address) & ~uintptr_t{4095});
  return ::mincore(page, 4096, &residency) == 0 || errno != ENOMEM;
}

// [0, 1 MiB) and [1 MiB, 2 MiB): adjacent in the guest, separate mappings on the host.
GuestMemory two_adjacent_regions() {
  const std::array<GuestRange, 2> ranges{{{0, kMiB}, {kMiB, kMiB}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

// KVM maps a guest's 2 MiB with one huge entry only where the host address is as aligned
// as the guest address (guest regions start 2 MiB aligned).
TEST(MmapRegion, AnonymousMemoryStartsOnA2MibBoundary) {
  constexpr uint64_t k2Mib = 2 << 20;
  for (const uint64_t size : {uint64_t{0x3000}, 3 * k2Mib + 0x5000, 8 * k2Mib}) {
    auto region = MmapRegion::anonymous(size);
    ASSERT_TRUE(region.has_value());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(region->data()) % k2Mib, 0u) << size;
    EXPECT_EQ(region->size(), size);
    region->data()[0] = 1;  // both ends are ours to write
    region->data()[size - 1] = 2;
  }
}

TEST(GuestMemory, FreshMemoryReadsZeroAndKeepsWhatIsWritten) {
  const std::array<GuestRange, 1> ranges{{{0, 2 * kMiB}}};
  ASSERT_OK_AND_ASSIGN(GuestMemory memory, GuestMemory::anonymous(ranges));
  ASSERT_OK_AND_ASSIGN(const uint64_t before, memory.read_obj<uint64_t>(0x1000));
  EXPECT_EQ(before, 0u);
  ASSERT_OK(memory.write_obj<uint64_t>(0x1000, 0x1122334455667788));
  ASSERT_OK_AND_ASSIGN(const uint64_t after, memory.read_obj<uint64_t>(0x1000));
  EXPECT_EQ(after, 0x1122334455667788u);
  ASSERT_OK_AND_ASSIGN(const uint8_t low_byte, memory.read_obj<uint8_t>(0x1000));
  EXPECT_EQ(low_byte, 0x88);
  EXPECT_EQ(memory.total_size(), 2 * kMiB);
}

TEST(GuestMemory, HostAddressAndSpanSeeTheSameBytes) {
  GuestMemory memory = two_adjacent_regions();
  ASSERT_OK_AND_ASSIGN(uint8_t * host, memory.host_address(kMiB + 0x10));
  *host = 0xab;
  ASSERT_OK_AND_ASSIGN(const uint8_t value, memory.read_obj<uint8_t>(kMiB + 0x10));
  EXPECT_EQ(value, 0xab);
  EXPECT_EQ(host, memory.regions()[1].host() + 0x10);
}

TEST(GuestMemory, RangeEndingAtTheRegionEndIsInside) {
  GuestMemory memory = two_adjacent_regions();
  ASSERT_OK_AND_ASSIGN(const auto span, memory.span(kMiB - 8, 8));
  EXPECT_EQ(span.size(), 8u);
  EXPECT_TRUE(memory.contains(0, kMiB));
  EXPECT_TRUE(memory.contains(kMiB, kMiB));
}

TEST(GuestMemory, RangeCrossingFromOneRegionIntoTheNextIsRefused) {
  GuestMemory memory = two_adjacent_regions();
  const auto span = memory.span(kMiB - 4, 8);
  ASSERT_FALSE(span.has_value());
  EXPECT_THAT(span.error().message(), HasSubstr("[0xffffc, +0x8) is not inside guest RAM"));
  std::array<uint8_t, 8> out{};
  EXPECT_FALSE(memory.read(kMiB - 4, out).has_value());
  EXPECT_FALSE(memory.write_obj<uint64_t>(kMiB - 4, 1).has_value());
  EXPECT_FALSE(memory.contains(0, 2 * kMiB));
}

TEST(GuestMemory, RangesOutsideEveryRegionAreRefused) {
  GuestMemory memory = two_adjacent_regions();
  EXPECT_FALSE(memory.span(2 * kMiB, 1).has_value());
  EXPECT_FALSE(memory.span(2 * kMiB - 1, 2).has_value());
  EXPECT_FALSE(memory.host_address(2 * kMiB).has_value());
  EXPECT_FALSE(memory.read_obj<uint32_t>(64 * kMiB).has_value());
}

TEST(GuestMemory, RangesThatWrapPastTheTopOfTheAddressSpaceAreRefused) {
  GuestMemory memory = two_adjacent_regions();
  // gpa + len wraps around to a small address that is inside RAM.
  EXPECT_FALSE(memory.span(0x1000, UINT64_MAX).has_value());
  EXPECT_FALSE(memory.span(UINT64_MAX, 2).has_value());
  EXPECT_FALSE(memory.span(UINT64_MAX - 3, 8).has_value());
  EXPECT_FALSE(memory.fill(0x10, UINT64_MAX - 0xf, 0).has_value());
}

TEST(GuestMemory, RegionAtTheTopOfTheAddressSpaceHasNoWrapAround) {
  constexpr uint64_t kTop = 0xffffffffffffe000;
  const std::array<GuestRange, 1> ranges{{{kTop, 0x1000}}};
  ASSERT_OK_AND_ASSIGN(GuestMemory memory, GuestMemory::anonymous(ranges));
  EXPECT_TRUE(memory.span(kTop, 0x1000).has_value());
  EXPECT_FALSE(memory.span(kTop + 0x800, 0x1000).has_value());
  EXPECT_FALSE(memory.span(kTop + 0x800, UINT64_MAX - 0x100).has_value());
}

TEST(GuestMemory, ZeroLengthRangesAreInsideOnlyWhereTheirAddressIs) {
  GuestMemory memory = two_adjacent_regions();
  ASSERT_OK_AND_ASSIGN(const auto empty, memory.span(0x500, 0));
  EXPECT_TRUE(empty.empty());
  EXPECT_TRUE(memory.span(2 * kMiB, 0).has_value());  // one past the last byte, like end()
  EXPECT_FALSE(memory.span(2 * kMiB + 0x1000, 0).has_value());
  EXPECT_FALSE(memory.span(UINT64_MAX, 0).has_value());
  EXPECT_TRUE(memory.write(0x500, {}).has_value());
}

TEST(GuestMemory, FailedReadLeavesTheBufferAlone) {
  GuestMemory memory = two_adjacent_regions();
  std::array<uint8_t, 4> out{1, 2, 3, 4};
  EXPECT_FALSE(memory.read(2 * kMiB - 2, out).has_value());
  EXPECT_EQ(out, (std::array<uint8_t, 4>{1, 2, 3, 4}));
}

TEST(GuestMemory, FromRegionsSortsByAddress) {
  std::vector<GuestRegion> regions;
  regions.emplace_back(0x100000000, MmapRegion::anonymous(0x2000).value());
  regions.emplace_back(0, MmapRegion::anonymous(0x1000).value());
  ASSERT_OK_AND_ASSIGN(GuestMemory memory, GuestMemory::from_regions(std::move(regions)));
  ASSERT_EQ(memory.regions().size(), 2u);
  EXPECT_EQ(memory.regions()[0].range(), (GuestRange{0, 0x1000}));
  EXPECT_EQ(memory.regions()[1].range(), (GuestRange{0x100000000, 0x2000}));
  EXPECT_TRUE(memory.span(0x100001ff0, 0x10).has_value());
}

TEST(GuestMemory, FromRegionsRefusesOverlappingRegions) {
  std::vector<GuestRegion> regions;
  regions.emplace_back(0, MmapRegion::anonymous(0x3000).value());
  regions.emplace_back(0x2000, MmapRegion::anonymous(0x1000).value());
  const auto memory = GuestMemory::from_regions(std::move(regions));
  ASSERT_FALSE(memory.has_value());
  EXPECT_THAT(memory.error().message(), HasSubstr("overlaps"));
}

TEST(GuestMemory, FromRegionsRefusesUnalignedEmptyAndWrappingRegions) {
  {
    std::vector<GuestRegion> regions;
    regions.emplace_back(0x800, MmapRegion::anonymous(0x1000).value());
    EXPECT_FALSE(GuestMemory::from_regions(std::move(regions)).has_value());
  }
  {
    std::vector<GuestRegion> regions;
    regions.emplace_back(0xfffffffffffff000, MmapRegion::anonymous(0x2000).value());
    const auto memory = GuestMemory::from_regions(std::move(regions));
    ASSERT_FALSE(memory.has_value());
    EXPECT_THAT(memory.error().message(), HasSubstr("wraps"));
  }
  EXPECT_FALSE(GuestMemory::from_regions({}).has_value());
  EXPECT_FALSE(MmapRegion::anonymous(0).has_value());
  EXPECT_FALSE(MmapRegion::anonymous(0x1800).has_value());
}

TEST(GuestMemory, MappingsLiveExactlyAsLongAsTheirOwner) {
  const std::array<GuestRange, 1> ranges{{{0, kMiB}}};
  const uint8_t* host = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(GuestMemory memory, GuestMemory::anonymous(ranges));
    host = memory.regions()[0].host();
    EXPECT_TRUE(is_mapped(host));
    GuestMemory moved = std::move(memory);
    EXPECT_TRUE(is_mapped(host));
    ASSERT_OK(moved.write_obj<uint32_t>(0, 7));
  }
  EXPECT_FALSE(is_mapped(host));
}

}  // namespace
}  // namespace dsec

// The guest-physical layout: RAM around the MMIO gap, device slots, and the e820 map the
// guest is told about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/arch/x86_64/e820.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {
namespace {

using ::testing::HasSubstr;

TEST(X86Layout, RamBelowTheGapIsOneRegionFromZero) {
  ASSERT_OK_AND_ASSIGN(const auto regions, ram_regions(256 * kMiB));
  EXPECT_EQ(regions, (std::vector<GuestRange>{{0, 256 * kMiB}}));
  ASSERT_OK_AND_ASSIGN(const auto exactly_to_gap, ram_regions(3 * kGiB));
  EXPECT_EQ(exactly_to_gap, (std::vector<GuestRange>{{0, 3 * kGiB}}));
}

TEST(X86Layout, RamAboveTheGapContinuesAtFourGiB) {
  ASSERT_OK_AND_ASSIGN(const auto regions, ram_regions(5 * kGiB));
  EXPECT_EQ(regions, (std::vector<GuestRange>{{0, 3 * kGiB}, {4 * kGiB, 2 * kGiB}}));
}

TEST(X86Layout, RamSizesThatCannotBeMappedAreRefused) {
  EXPECT_THAT(ram_regions(256 * kMiB + 1).error().message(), HasSubstr("multiple of 4 KiB"));
  EXPECT_FALSE(ram_regions(kMiB).has_value());
  EXPECT_FALSE(ram_regions(0).has_value());
  EXPECT_FALSE(ram_regions(kMaxRamBytes + kPageSize).has_value());
  EXPECT_FALSE(ram_regions(UINT64_MAX & ~(kPageSize - 1)).has_value());
}

TEST(X86Layout, VirtioSlotsSitInTheGapWithTheirOwnIrqs) {
  for (uint32_t i = 0; i < kMaxVirtioMmioDevices; ++i) {
    const VirtioMmioSlot slot = virtio_mmio_slot(i);
    EXPECT_GE(slot.address, kMmioGapStart);
    EXPECT_LE(slot.address + kVirtioMmioSlotSize, kIoapicAddr);
    EXPECT_GE(slot.irq, kFirstDeviceIrq);
    EXPECT_LT(slot.irq, kIoapicPins);
    EXPECT_NE(slot.irq, kCom1Irq);
    EXPECT_NE(slot.irq, kI8042Irq);
  }
  EXPECT_EQ(virtio_mmio_slot(1).address - virtio_mmio_slot(0).address, 4096u);
}

TEST(X86Layout, KvmPrivatePagesAreInTheGapClearOfTheApics) {
  EXPECT_GE(kKvmIdentityMapAddr, kMmioGapStart);
  EXPECT_EQ(kKvmTssAddr, kKvmIdentityMapAddr + kPageSize);
  EXPECT_LE(kKvmPrivateEnd, kMmioGapEnd);
  EXPECT_TRUE(kKvmIdentityMapAddr >= kLapicAddr + kPageSize);
}

// The e820 map, RAM entries only, merged where they touch.
std::vector<GuestRange> ram_in(const std::vector<boot_e820_entry>& map) {
  std::vector<GuestRange> ram;
  for (const boot_e820_entry& entry : map) {
    if (entry.type != kE820Ram) {
      continue;
    }
    if (!ram.empty() && ram.back().end() == entry.addr) {
      ram.back().size += entry.size;
    } else {
      ram.push_back({entry.addr, entry.size});
    }
  }
  return ram;
}

void expect_sorted_without_overlap(const std::vector<boot_e820_entry>& map) {
  for (size_t i = 1; i < map.size(); ++i) {
    EXPECT_LE(map[i - 1].addr + map[i - 1].size, uint64_t{map[i].addr}) << "entry " << i;
  }
}

TEST(X86Layout, E820DescribesExactlyTheRamLessTheMpTableArea) {
  for (const uint64_t ram_bytes : {64 * kMiB, 3 * kGiB, 5 * kGiB}) {
    SCOPED_TRACE(ram_bytes);
    const auto regions = ram_regions(ram_bytes).value();
    const auto map = e820_map(regions);
    expect_sorted_without_overlap(map);
    // Every byte of RAM is in the map: usable, or reserved for the MP table area.
    std::vector<GuestRange> expected_ram{{0, kMpTableAddr},
                                         {kHighMemStart, regions[0].size - kHighMemStart}};
    if (regions.size() > 1) {
      expected_ram.push_back(regions[1]);
    }
    EXPECT_EQ(ram_in(map), expected_ram);
    uint64_t reserved_in_ram = 0;
    uint64_t total = 0;
    for (const boot_e820_entry& entry : map) {
      if (entry.type == kE820Reserved && entry.addr < kHighMemStart) {
        EXPECT_EQ(uint64_t{entry.addr}, kMpTableAddr);
        EXPECT_EQ(entry.addr + entry.size, kHighMemStart);
        reserved_in_ram += entry.size;
      }
      if (entry.addr < kMmioGapStart || entry.addr >= kMmioGapEnd) {
        total += entry.size;
      }
    }
    EXPECT_EQ(reserved_in_ram, kHighMemStart - kMpTableAddr);
    EXPECT_EQ(total, ram_bytes);
  }
}

TEST(X86Layout, E820ReservesKvmsPrivatePages) {
  const auto map = e820_map(ram_regions(64 * kMiB).value());
  bool found = false;
  for (const boot_e820_entry& entry : map) {
    if (entry.addr == kKvmIdentityMapAddr) {
      found = true;
      EXPECT_EQ(uint64_t{entry.size}, kKvmPrivateEnd - kKvmIdentityMapAddr);
      EXPECT_EQ(uint32_t{entry.type}, kE820Reserved);
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace dsec::x86_64

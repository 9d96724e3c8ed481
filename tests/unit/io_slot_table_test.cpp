// SlotTable: keys handed to the kernel as user_data never find a record they were not
// made for, however slots are reused.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "vmm/io/slot_table.h"

namespace dsec::io {
namespace {

TEST(SlotTable, FindsLiveKeysOnly) {
  SlotTable<int> table;
  auto a = table.allocate();
  a.value = 7;
  auto b = table.allocate();
  b.value = 8;
  EXPECT_NE(a.key, b.key);
  ASSERT_NE(table.find(a.key), nullptr);
  EXPECT_EQ(*table.find(a.key), 7);
  EXPECT_EQ(*table.find(b.key), 8);
  EXPECT_EQ(table.live(), 2u);

  table.release(a.key);
  EXPECT_EQ(table.find(a.key), nullptr);
  EXPECT_EQ(table.live(), 1u);
  table.release(a.key);  // twice is harmless
  EXPECT_EQ(table.live(), 1u);
}

TEST(SlotTable, AStaleKeyMissesTheSlotsNextOccupant) {
  SlotTable<int> table;
  const uint64_t old_key = table.allocate().key;
  table.release(old_key);
  auto reused = table.allocate();
  EXPECT_EQ(static_cast<uint32_t>(reused.key), static_cast<uint32_t>(old_key))
      << "the freed slot is reused";
  EXPECT_NE(reused.key, old_key);
  EXPECT_EQ(table.find(old_key), nullptr);
  EXPECT_NE(table.find(reused.key), nullptr);
  table.release(old_key);  // a stale release does not end the new occupant
  EXPECT_NE(table.find(reused.key), nullptr);
}

TEST(SlotTable, ReservedAndForeignKeysFindNothing) {
  SlotTable<int> table;
  std::vector<uint64_t> keys;
  keys.reserve(100);
  for (int i = 0; i < 100; ++i) {
    keys.push_back(table.allocate().key);
  }
  EXPECT_EQ(table.find(SlotTable<int>::kNoKey), nullptr);
  EXPECT_EQ(table.find(~uint64_t{0}), nullptr);  // liburing's LIBURING_UDATA_TIMEOUT
  EXPECT_EQ(table.find(uint64_t{1} << 40), nullptr);
  EXPECT_EQ(table.find(keys[5] + (uint64_t{1} << 32)), nullptr) << "a future generation";
  EXPECT_EQ(std::set<uint64_t>(keys.begin(), keys.end()).size(), keys.size());
}

TEST(SlotTable, ValuesKeepTheirAddressWhileTheTableGrows) {
  SlotTable<int> table;
  auto first = table.allocate();
  int* address = &first.value;
  for (int i = 0; i < 10000; ++i) {
    table.allocate();
  }
  EXPECT_EQ(table.find(first.key), address);
}

TEST(SlotTable, ForEachLiveVisitsLiveSlots) {
  SlotTable<int> table;
  auto a = table.allocate();
  auto b = table.allocate();
  auto c = table.allocate();
  table.release(b.key);
  std::set<uint64_t> seen;
  table.for_each_live([&](uint64_t key, int&) { seen.insert(key); });
  EXPECT_EQ(seen, (std::set<uint64_t>{a.key, c.key}));
}

}  // namespace
}  // namespace dsec::io

// The jail ids of the pool's clones (vmm/pool/jail_ids.h): --jail-ids parsed, each id handed
// out once until it is freed, the ids of recovered clones adopted.
#include "vmm/pool/jail_ids.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/result_matchers.h"

namespace dsec::pool {
namespace {

using ::testing::HasSubstr;

TEST(PoolJailIdRange, ParsesFirstDashLastAndRefusesWhatIsNoRangeOfUnprivilegedIds) {
  ASSERT_OK_AND_ASSIGN(auto range, parse_jail_id_range("200000-265535"));
  EXPECT_EQ(range, (JailIdRange{.first = 200000, .last = 265535}));
  ASSERT_OK_AND_ASSIGN(auto one, parse_jail_id_range("7-7"));
  EXPECT_EQ(one, (JailIdRange{.first = 7, .last = 7}));
  for (const char* bad : {"", "5", "-5", "5-", "a-b", "1-2-3", " 1-2", "0-10", "10-5",
                          "1-4294967295", "1-99999999999"}) {
    const auto parsed = parse_jail_id_range(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_THAT(parsed.error().message(), HasSubstr("--jail-ids")) << bad;
  }
}

TEST(PoolJailIds, HandsOutEachIdOnceUntilItIsFreedAndTheFreedLast) {
  JailIds ids({.first = 10, .last = 12});
  ASSERT_OK_AND_ASSIGN(auto a, ids.allocate());
  ASSERT_OK_AND_ASSIGN(auto b, ids.allocate());
  ASSERT_OK_AND_ASSIGN(auto c, ids.allocate());
  EXPECT_EQ(std::vector({a, b, c}), std::vector<uint32_t>({10, 11, 12}));
  const auto full = ids.allocate();
  ASSERT_FALSE(full);
  EXPECT_THAT(full.error().message(), HasSubstr("every id of --jail-ids 10-12 is a live clone's"));

  ids.release(11);
  ASSERT_OK_AND_ASSIGN(auto again, ids.allocate());
  EXPECT_EQ(again, 11U) << "the only free one";
  ids.release(10);
  ids.release(12);
  ASSERT_OK_AND_ASSIGN(auto next, ids.allocate());
  EXPECT_EQ(next, 12U) << "after the last handed out, not the lowest free";
  EXPECT_TRUE(ids.used(11) && ids.used(12) && !ids.used(10));
}

TEST(PoolJailIds, AdoptsTheIdsOfRecoveredClones) {
  JailIds ids({.first = 10, .last = 12});
  EXPECT_TRUE(ids.adopt(10));
  EXPECT_TRUE(ids.adopt(12));
  EXPECT_FALSE(ids.adopt(12)) << "used already";
  EXPECT_FALSE(ids.adopt(9)) << "outside the range: never handed out";
  ASSERT_OK_AND_ASSIGN(auto id, ids.allocate());
  EXPECT_EQ(id, 11U);
  EXPECT_FALSE(ids.allocate());
}

}  // namespace
}  // namespace dsec::pool

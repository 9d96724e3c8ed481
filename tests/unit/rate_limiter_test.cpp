// Token buckets on a clock the test moves (refill, one-time burst, an operation larger than
// the bucket, size 0 meaning no limit), and LoopRateLimiter's timer on a real event loop:
// a refused operation is resumed by the loop, not by anyone asking again.
#include "vmm/devices/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "tests/support/result_matchers.h"
#include "vmm/io/event_loop.h"

namespace dsec::devices {
namespace {

using namespace std::chrono_literals;

const RateClock::time_point kStart = RateClock::time_point() + 1000s;

// 1000 tokens refilled over 100 ms: 10 a millisecond.
constexpr TokenBucketConfig kThousandPer100Ms{
    .size = 1000, .one_time_burst = 0, .refill_time_ms = 100};

TEST(TokenBucket, StartsFullAndRefusesWhatItDoesNotHold) {
  TokenBucket bucket(kThousandPer100Ms, kStart);
  EXPECT_EQ(bucket.available(kStart), 1000u);
  EXPECT_TRUE(bucket.take(600, kStart));
  EXPECT_FALSE(bucket.take(500, kStart));  // nothing taken by a refusal
  EXPECT_TRUE(bucket.take(400, kStart));
  EXPECT_FALSE(bucket.take(1, kStart));
  EXPECT_EQ(bucket.available(kStart), 0u);
}

TEST(TokenBucket, RefillsEvenlyOverItsRefillTimeUpToItsSize) {
  TokenBucket bucket(kThousandPer100Ms, kStart);
  ASSERT_TRUE(bucket.take(1000, kStart));
  EXPECT_EQ(bucket.available(kStart + 25ms), 250u);
  EXPECT_EQ(bucket.available(kStart + 50ms), 500u);
  EXPECT_FALSE(bucket.take(501, kStart + 50ms));
  EXPECT_TRUE(bucket.take(500, kStart + 50ms));
  EXPECT_EQ(bucket.available(kStart + 50ms), 0u);
  EXPECT_EQ(bucket.available(kStart + 10s), 1000u);  // never more than its size
  // Time a full bucket spent full buys nothing later.
  EXPECT_TRUE(bucket.take(1000, kStart + 10s));
  EXPECT_EQ(bucket.available(kStart + 10s + 10ms), 100u);
}

TEST(TokenBucket, KeepsTheFractionOfATokenBetweenRefills) {
  // One token every 3 ms (1 over 3 ms): 10 refills of 1.5 ms each bring 5 tokens.
  TokenBucket bucket({.size = 1, .one_time_burst = 0, .refill_time_ms = 3}, kStart);
  ASSERT_TRUE(bucket.take(1, kStart));
  int taken = 0;
  for (int i = 1; i <= 10; ++i) {
    taken += bucket.take(1, kStart + i * 1500us) ? 1 : 0;
  }
  EXPECT_EQ(taken, 5);
}

TEST(TokenBucket, SaysHowLongUntilATakeGives) {
  TokenBucket bucket(kThousandPer100Ms, kStart);
  ASSERT_TRUE(bucket.take(1000, kStart));
  EXPECT_EQ(bucket.time_until(300, kStart), 30ms);
  EXPECT_EQ(bucket.time_until(300, kStart + 10ms), 20ms);
  EXPECT_FALSE(bucket.take(300, kStart + 30ms - 1ns));
  EXPECT_TRUE(bucket.take(300, kStart + 30ms));
  EXPECT_EQ(bucket.time_until(0, kStart + 30ms), 0ns);
}

TEST(TokenBucket, SpendsTheOneTimeBurstFirstAndNeverRefillsIt) {
  TokenBucket bucket({.size = 100, .one_time_burst = 1000, .refill_time_ms = 100}, kStart);
  EXPECT_EQ(bucket.available(kStart), 1100u);
  EXPECT_TRUE(bucket.take(1000, kStart));  // all from the burst
  EXPECT_EQ(bucket.available(kStart), 100u);
  EXPECT_TRUE(bucket.take(100, kStart + 50ms));
  EXPECT_FALSE(bucket.take(1, kStart + 50ms));
  EXPECT_EQ(bucket.available(kStart + 1h), 100u);  // the burst does not come back
}

TEST(TokenBucket, ABurstPartlySpentMakesUpTheRestFromTheBucket) {
  TokenBucket bucket({.size = 100, .one_time_burst = 30, .refill_time_ms = 100}, kStart);
  EXPECT_TRUE(bucket.take(80, kStart));  // 30 of the burst, 50 of the bucket
  EXPECT_EQ(bucket.available(kStart), 50u);
}

TEST(TokenBucket, AnOperationLargerThanTheBucketGoesFromAFullOneAndLeavesADebt) {
  TokenBucket bucket(kThousandPer100Ms, kStart);
  ASSERT_TRUE(bucket.take(1, kStart));
  // Not full: it waits for the bucket to fill, then goes.
  EXPECT_FALSE(bucket.take(3000, kStart));
  EXPECT_EQ(bucket.time_until(3000, kStart), 100us);  // one token
  EXPECT_TRUE(bucket.take(3000, kStart + 100us));
  // 2000 tokens owed: 200 ms before the bucket gives again, 10 ms more for 100 tokens.
  EXPECT_EQ(bucket.available(kStart + 100us + 150ms), 0u);
  EXPECT_EQ(bucket.time_until(100, kStart + 100us), 210ms);
  EXPECT_FALSE(bucket.take(100, kStart + 100us + 210ms - 1ns));
  EXPECT_TRUE(bucket.take(100, kStart + 100us + 210ms));
}

TEST(TokenBucket, SizeOrRefillTimeZeroLimitsNothing) {
  for (const TokenBucketConfig config :
       {TokenBucketConfig{.size = 0, .one_time_burst = 0, .refill_time_ms = 100},
        TokenBucketConfig{.size = 1000, .one_time_burst = 5, .refill_time_ms = 0}}) {
    TokenBucket bucket(config, kStart);
    for (int i = 0; i < 100; ++i) {
      EXPECT_TRUE(bucket.take(std::numeric_limits<uint64_t>::max(), kStart));
    }
    EXPECT_EQ(bucket.time_until(std::numeric_limits<uint64_t>::max(), kStart), 0ns);
  }
}

TEST(TokenBucket, HugeValuesDoNotOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  TokenBucket bucket({.size = kMax, .one_time_burst = kMax, .refill_time_ms = kMax}, kStart);
  EXPECT_EQ(bucket.available(kStart), kMax);
  EXPECT_TRUE(bucket.take(kMax, kStart));
  EXPECT_TRUE(bucket.take(kMax, kStart));
  // 2^64 tokens over 2^64 ms: one a millisecond.
  EXPECT_EQ(bucket.available(kStart + 1h), 3'600'000u);
  EXPECT_GT(bucket.time_until(kMax, kStart), 24h * 365 * 100);
}

TEST(RateLimiter, TakesFromBothBucketsOrFromNeither) {
  RateLimiter limiter(
      {.bandwidth = kThousandPer100Ms,
       .ops = TokenBucketConfig{.size = 2, .one_time_burst = 0, .refill_time_ms = 100}},
      kStart);
  EXPECT_TRUE(limiter.limits());
  EXPECT_TRUE(limiter.take(400, kStart));
  EXPECT_FALSE(limiter.take(700, kStart));  // bytes short: no op taken either
  EXPECT_TRUE(limiter.take(600, kStart));   // the second op
  EXPECT_FALSE(limiter.take(0, kStart));    // ops short
  EXPECT_EQ(limiter.time_until(0, kStart), 50ms);
  EXPECT_EQ(limiter.time_until(500, kStart), 50ms);
  EXPECT_EQ(limiter.time_until(800, kStart), 80ms);
}

TEST(RateLimiter, WithoutBucketsOrWithEmptyOnesLimitsNothing) {
  for (const RateLimiterConfig config :
       {RateLimiterConfig{},
        RateLimiterConfig{.bandwidth = TokenBucketConfig{}, .ops = TokenBucketConfig{}}}) {
    RateLimiter limiter(config, kStart);
    EXPECT_FALSE(limiter.limits());
    EXPECT_TRUE(limiter.take(std::numeric_limits<uint64_t>::max(), kStart));
    EXPECT_TRUE(limiter.take(std::numeric_limits<uint64_t>::max(), kStart));
  }
}

// Turns `loop` until `done` holds or 5 s pass.
template <typename Done>
bool turn_until(io::EventLoop& loop, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (!loop.run_once(10ms)) {
      return false;
    }
  }
  return done();
}

TEST(LoopRateLimiter, ARefusedOperationIsResumedByATimerOnTheLoop) {
  auto loop = io::EventLoop::create(8);
  ASSERT_OK(loop);
  int resumed = 0;
  // One operation per 20 ms.
  LoopRateLimiter limiter(
      {.bandwidth = std::nullopt,
       .ops = TokenBucketConfig{.size = 1, .one_time_burst = 0, .refill_time_ms = 20}},
      *loop, [&] { ++resumed; });
  EXPECT_TRUE(limiter.admit(4096));
  EXPECT_FALSE(limiter.admit(4096));
  EXPECT_TRUE(limiter.waiting());
  const size_t timers = loop->pending_operations();
  EXPECT_FALSE(limiter.admit(4096));  // refused while waiting, and no second timer
  EXPECT_EQ(loop->pending_operations(), timers);
  EXPECT_EQ(resumed, 0);
  ASSERT_TRUE(turn_until(*loop, [&] { return resumed == 1; }));
  EXPECT_FALSE(limiter.waiting());
  EXPECT_TRUE(limiter.admit(4096));
}

TEST(LoopRateLimiter, ATimerThatOutlivesItsLimiterCallsNobody) {
  auto loop = io::EventLoop::create(8);
  ASSERT_OK(loop);
  int resumed = 0;
  const size_t before = loop->pending_operations();
  {
    LoopRateLimiter limiter(
        {.bandwidth = std::nullopt,
         .ops = TokenBucketConfig{.size = 1, .one_time_burst = 0, .refill_time_ms = 1}},
        *loop, [&] { ++resumed; });
    ASSERT_TRUE(limiter.admit(0));
    ASSERT_FALSE(limiter.admit(0));
  }
  ASSERT_TRUE(turn_until(*loop, [&] { return loop->pending_operations() == before; }));
  EXPECT_EQ(resumed, 0);
}

TEST(LoopRateLimiter, WithoutALimitAdmitsEverythingAndSetsNoTimer) {
  auto loop = io::EventLoop::create(8);
  ASSERT_OK(loop);
  const size_t before = loop->pending_operations();
  LoopRateLimiter limiter({}, *loop, [] {});
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limiter.admit(1 << 20));
  }
  EXPECT_EQ(loop->pending_operations(), before);
}

}  // namespace
}  // namespace dsec::devices

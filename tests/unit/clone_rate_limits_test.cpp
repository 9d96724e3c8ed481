// A clone's network rate limits (vmm/network/clone_rate_limits.h): an image's
// "rx_rate_limiter" and "tx_rate_limiter" (PUT /images/{name}) read strictly, kept in
// images.json, refused with the field and its bounds when negative, fractional, huge,
// zero or malformed; and `restore --net-rate-limiters`'s JSON, which the pool's clones get.
#include "vmm/network/clone_rate_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::network {
namespace {

using devices::RateLimiterConfig;
using devices::TokenBucketConfig;
using ::testing::HasSubstr;

std::string refusal(const std::string& limiters) {
  const auto spec = pool::parse_image_spec("base", R"({"ready": 1, )" + limiters + "}");
  return spec ? std::string("accepted") : spec.error().message();
}

TEST(CloneRateLimits, AnImagesLimitsAreNoneByDefaultAndKeptInImagesJson) {
  ASSERT_OK_AND_ASSIGN(const auto plain, pool::parse_image_spec("base", R"({"ready": 1})"));
  EXPECT_EQ(plain.net_rate_limits, CloneRateLimits{});
  EXPECT_FALSE(plain.net_rate_limits.limits());
  EXPECT_FALSE(pool::image_spec_json(plain).contains("rx_rate_limiter"));

  ASSERT_OK_AND_ASSIGN(
      const auto spec,
      pool::parse_image_spec("base", R"({"rx_rate_limiter": {"bandwidth": {"size": 125000,
          "refill_time": 100}}, "tx_rate_limiter": {"bandwidth": {"size": 62500,
          "one_time_burst": 1000000, "refill_time": 100}, "ops": {"size": 100,
          "refill_time": 1000}}})"));
  EXPECT_EQ(
      spec.net_rate_limits.rx,
      (RateLimiterConfig{.bandwidth = TokenBucketConfig{.size = 125000, .refill_time_ms = 100},
                         .ops = std::nullopt}));
  EXPECT_EQ(spec.net_rate_limits.tx.bandwidth,
            (TokenBucketConfig{.size = 62500, .one_time_burst = 1000000, .refill_time_ms = 100}));
  EXPECT_EQ(spec.net_rate_limits.tx.ops, (TokenBucketConfig{.size = 100, .refill_time_ms = 1000}));
  ASSERT_OK_AND_ASSIGN(const auto again, pool::image_spec_from_json(pool::image_spec_json(spec)));
  EXPECT_EQ(again, spec);
  // The same limits as restore's --net-rate-limiters takes them.
  ASSERT_OK_AND_ASSIGN(const auto passed,
                       parse_clone_rate_limits(clone_rate_limits_text(spec.net_rate_limits)));
  EXPECT_EQ(passed, spec.net_rate_limits);
}

TEST(CloneRateLimits, BadLimitsAreRefusedNamingTheFieldAndItsBounds) {
  const std::string bounds = "give 'size' and 'one_time_burst' up to 1099511627776";
  EXPECT_THAT(refusal(R"("rx_rate_limiter": {"bandwidth": {"size": -1, "refill_time": 100}})"),
              HasSubstr("'size'"));
  EXPECT_THAT(refusal(R"("rx_rate_limiter": {"bandwidth": {"size": 1.5, "refill_time": 100}})"),
              HasSubstr("'size'"));
  EXPECT_THAT(refusal(R"("tx_rate_limiter": {"ops": {"size": "10", "refill_time": 100}})"),
              HasSubstr("'size'"));
  EXPECT_THAT(refusal(R"("tx_rate_limiter": {"ops": {"size": 1e30, "refill_time": 100}})"),
              HasSubstr("'size'"));
  EXPECT_THAT(
      refusal(R"("tx_rate_limiter": {"ops": {"size": 18446744073709551616, "refill_time": 1}})"),
      HasSubstr("'size'"));
  EXPECT_THAT(refusal(R"("tx_rate_limiter": {"ops": {"size": 1099511627777, "refill_time": 1}})"),
              HasSubstr(bounds));
  EXPECT_THAT(refusal(R"("tx_rate_limiter": {"ops": {"size": 10, "one_time_burst":
      18446744073709551615, "refill_time": 1}})"),
              HasSubstr("'tx_rate_limiter.ops': size 10, one_time_burst 18446744073709551615"));
  EXPECT_THAT(
      refusal(R"("rx_rate_limiter": {"bandwidth": {"size": 1000, "refill_time": 3600001}})"),
      HasSubstr("refill_time' from 1 to 3600000 ms"));
  EXPECT_THAT(
      refusal(R"("rx_rate_limiter": {"bandwidth": {"size": 0, "refill_time": 100}})"),
      HasSubstr("'rx_rate_limiter.bandwidth': a 'size' or 'refill_time' of 0 limits nothing"));
  EXPECT_THAT(refusal(R"("rx_rate_limiter": {"bandwidth": {"size": 10, "refill_time": 0}})"),
              HasSubstr("leave the bucket out for no limit"));
  EXPECT_THAT(refusal(R"("rx_rate_limiter": {"bandwidth": {"size": 10}})"),
              HasSubstr("'refill_time' is missing"));
  EXPECT_THAT(refusal(R"("rx_rate_limiter": {"bandwith": {"size": 10, "refill_time": 1}})"),
              HasSubstr("unknown field 'bandwith'"));
  EXPECT_THAT(refusal(R"("rx_rate_limiter": [1, 2])"), HasSubstr("rx_rate_limiter"));
  EXPECT_THAT(refusal(R"("net_rate_limiter": {})"), HasSubstr("unknown field 'net_rate_limiter'"));
  EXPECT_FALSE(parse_clone_rate_limits("{").has_value());
  EXPECT_THAT(parse_clone_rate_limits(R"({"rx": {}})").error().message(),
              HasSubstr("unknown field 'rx'"));
}

// The pool's clone gets its image's limits on restore's command line, and the restored
// device takes them instead of the snapshot's; a direction not given keeps the snapshot's.
TEST(CloneRateLimits, ARestoredClonesDeviceTakesTheLimitsGivenInsteadOfTheSnapshots) {
  pool::CloneLaunch launch;
  launch.dir = "/run/pool/sandboxes/sb-1";
  launch.netns = "/run/netns/dp0ac80004";
  launch.tap = "dsnet0";
  launch.net_rate_limiters = R"({"tx_rate_limiter":{"ops":{"size":10,"refill_time":1}}})";
  EXPECT_THAT(pool::restore_argv("/bin/dsec-vmm", launch, pool::CloneLimits{}, {}),
              ::testing::IsSupersetOf(std::vector<std::string>{
                  "--net", "tap=dsnet0", "--net-rate-limiters", launch.net_rate_limiters}));
  launch.net_rate_limiters.clear();
  EXPECT_THAT(pool::restore_argv("/bin/dsec-vmm", launch, pool::CloneLimits{}, {}),
              ::testing::Not(::testing::Contains("--net-rate-limiters")));

  machine::MachineConfig snapshot;
  snapshot.nets.emplace_back();
  snapshot.nets[0].tap = "dsnet0";
  const TokenBucketConfig snapshots{.size = 1, .refill_time_ms = 1};
  snapshot.nets[0].rx_rate_limiter.bandwidth = snapshots;
  snapshot.nets[0].tx_rate_limiter.bandwidth = snapshots;
  machine::RestoreOverrides overrides;
  const RateLimiterConfig given{.bandwidth = std::nullopt,
                                .ops = TokenBucketConfig{.size = 10, .refill_time_ms = 1}};
  overrides.nets = {{.tap = "dsnet0", .tx_rate_limiter = given}};
  ASSERT_OK_AND_ASSIGN(auto clone, machine::apply_overrides(snapshot, overrides));
  EXPECT_EQ(clone.nets[0].tx_rate_limiter, given);
  EXPECT_EQ(clone.nets[0].rx_rate_limiter.bandwidth, snapshots);
}

}  // namespace
}  // namespace dsec::network

// The egress policy as the pool's API takes it (vmm/network/network_json.h,
// vmm/pool/pool_requests.h): PUT /images/{name}'s "egress", POST /sandboxes' and
// PATCH /sandboxes/{id}/network's, each refused with a message that says what to fix, and
// a caller's policy combined with its image's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/result_matchers.h"
#include "vmm/network/network_json.h"
#include "vmm/pool/pool_requests.h"

namespace dsec::pool {
namespace {

using network::EgressPolicy;
using network::EgressRule;
using ::testing::HasSubstr;

std::string refusal(const std::string& body) {
  auto policy = parse_network_patch(body);
  return policy ? std::string("accepted") : policy.error().message();
}

std::string rules(size_t count) {
  std::string list = "[";
  for (size_t i = 0; i < count; ++i) {
    list += (i == 0 ? "\"10.0." : ",\"10.0.") + std::to_string(i / 256) + "." +
            std::to_string(i % 256) + "/32\"";
  }
  return list + "]";
}

TEST(PoolEgress, AnImagesPolicyIsNoneByDefaultAndReadBackAsWritten) {
  ASSERT_OK_AND_ASSIGN(const auto plain, parse_image_spec("base", R"({"ready": 1})"));
  EXPECT_EQ(plain.egress, EgressPolicy{});
  ASSERT_OK_AND_ASSIGN(
      const auto spec,
      parse_image_spec("base", R"({"egress": {"mode": "allow", "allow": ["10.1.0.0/16:443",
          "192.168.0.0/24:8000-8100"], "deny": ["10.1.2.0/24"], "reserved_allow": ["10.0.2.3/32:53"]}})"));
  EXPECT_EQ(spec.egress.mode, EgressPolicy::Mode::kAllowList);
  ASSERT_EQ(spec.egress.allow.size(), 2U);
  EXPECT_EQ(spec.egress.allow[1], (EgressRule{.destination = {.address = 0xC0A80000, .prefix = 24},
                                              .first_port = 8000,
                                              .last_port = 8100}));
  ASSERT_EQ(spec.egress.reserved_allow.size(), 1U);
  // images.json keeps it.
  ASSERT_OK_AND_ASSIGN(const auto again, image_spec_from_json(image_spec_json(spec)));
  EXPECT_EQ(again, spec);
}

TEST(PoolEgress, BadPoliciesAreRefusedSayingWhatToFix) {
  EXPECT_THAT(refusal(R"({"mode": "some"})"), HasSubstr("give \"none\", \"all\" or \"allow\""));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": ["10.0.0/8"]})"), HasSubstr("A.B.C.D/N:PORT"));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": ["10.0.0.1/8"]})"), HasSubstr("host bits set"));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": ["10.0.0.0/8:70000"]})"),
              HasSubstr("from 1 to 65535"));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": ["10.0.0.0/8:0"]})"),
              HasSubstr("from 1 to 65535"));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": ["10.0.0.0/8:90-80"]})"),
              HasSubstr("not a range"));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": [17]})"), HasSubstr("not a string"));
  EXPECT_THAT(refusal(R"({"mode": "allow", "allow": )" + rules(257) + "}"),
              HasSubstr("at most 256"));
  EXPECT_EQ(refusal(R"({"mode": "allow", "allow": )" + rules(256) + "}"), "accepted");
  EXPECT_THAT(refusal(R"({"mode": "all", "allow": ["10.0.0.0/8"]})"),
              HasSubstr("give \"mode\": \"allow\""));
  EXPECT_THAT(refusal(R"({"mode": "all", "port": 1})"), HasSubstr("port"));
  EXPECT_THAT(refusal("not json"), HasSubstr("not JSON"));
  // Reserved destinations are the operator's to allow, on the image.
  EXPECT_THAT(refusal(R"({"mode": "all", "reserved_allow": ["10.0.2.3/32"]})"),
              HasSubstr("only the operator's image"));
  auto acquire =
      parse_acquire(R"({"image": "base", "egress": {"mode": "all", "deny": ["1.2.3.4"]}})");
  ASSERT_FALSE(acquire.has_value());
  EXPECT_THAT(acquire.error().message(), HasSubstr("egress 'deny'"));
}

TEST(PoolEgress, ACallersPolicyReplacesTheImagesButKeepsItsDenyAndReservedAllow) {
  ASSERT_OK_AND_ASSIGN(auto acquire, parse_acquire(R"({"image": "base", "egress": {"mode":
      "allow", "allow": ["10.2.0.0/16"], "deny": ["10.2.3.0/24"]}})"));
  ASSERT_TRUE(acquire.egress.has_value());
  const EgressPolicy image{
      .mode = EgressPolicy::Mode::kAll,
      .allow = {},
      .deny = {{.destination = {.address = 0x0A020400, .prefix = 24}}},
      .reserved_allow = {{.destination = {.address = 0x0A000203, .prefix = 32}}}};
  ASSERT_OK_AND_ASSIGN(const auto combined, caller_egress(image, *acquire.egress));
  EXPECT_EQ(combined.mode, EgressPolicy::Mode::kAllowList);
  EXPECT_EQ(combined.allow, acquire.egress->allow);
  ASSERT_EQ(combined.deny.size(), 2U);
  EXPECT_EQ(combined.deny[0], image.deny[0]);  // the image's first
  EXPECT_EQ(combined.reserved_allow, image.reserved_allow);
  // Both deny lists together stay within the limit.
  EgressPolicy full;
  full.deny.assign(200, EgressRule{.destination = {.address = 0x0A000000, .prefix = 8}});
  auto over = caller_egress(full, full);
  ASSERT_FALSE(over.has_value());
  EXPECT_THAT(over.error().message(), HasSubstr("more than 256"));
}

// A resolver (docs/network.md, "DNS"): an address, kept through images.json and the
// launcher's JSON, the image's kept under a caller's policy that names none.
TEST(PoolEgress, AResolverIsOneAddressAndTheImagesHoldsUnlessTheCallerNamesOne) {
  ASSERT_OK_AND_ASSIGN(const auto spec,
                       parse_image_spec("base", R"({"egress": {"resolver": "10.0.2.3"}})"));
  EXPECT_EQ(spec.egress.resolver, 0x0A000203U);
  EXPECT_EQ(spec.egress.mode, EgressPolicy::Mode::kNone);
  EXPECT_EQ(image_spec_json(spec)["egress"]["resolver"], "10.0.2.3");
  ASSERT_OK_AND_ASSIGN(const auto again, image_spec_from_json(image_spec_json(spec)));
  EXPECT_EQ(again, spec);
  EXPECT_FALSE(network::egress_json(EgressPolicy{}).contains("resolver"));

  ASSERT_OK_AND_ASSIGN(const auto patch, parse_network_patch(R"({"mode": "all"})"));
  ASSERT_OK_AND_ASSIGN(auto combined, caller_egress(spec.egress, patch));
  EXPECT_EQ(combined.resolver, 0x0A000203U);
  ASSERT_OK_AND_ASSIGN(const auto own,
                       parse_network_patch(R"({"mode": "none", "resolver": "1.1.1.1"})"));
  ASSERT_OK_AND_ASSIGN(combined, caller_egress(spec.egress, own));
  EXPECT_EQ(combined.resolver, 0x01010101U);

  for (const char* bad :
       {R"("10.0.2")", R"("10.0.2.3/32")", R"("10.0.2.3:53")", R"("0.0.0.0")",
        R"("255.255.255.255")", R"("224.0.0.251")", R"("::1")", R"(" 10.0.2.3")", R"("")"}) {
    EXPECT_THAT(refusal(std::string(R"({"mode": "none", "resolver": )") + bad + "}"),
                HasSubstr("resolver"))
        << bad;
  }
  EXPECT_THAT(refusal(R"({"resolver": 167772675})"), HasSubstr("resolver"));
  EXPECT_THAT(refusal(R"({"resolver": "10.0.2.3"})"), HasSubstr("accepted"));
}

}  // namespace
}  // namespace dsec::pool

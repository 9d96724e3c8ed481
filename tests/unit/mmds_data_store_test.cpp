// MMDS's data store and its guest answers: PUT, RFC 7396 merge patches, the size limit,
// hostile bodies (deep, large, not JSON), IMDS and JSON formats, and version 2's tokens
// (a clock the test moves: expiry, the bounded table).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "vmm/mmds/mmds.h"

namespace dsec::mmds {
namespace {

using namespace std::chrono_literals;
using Clock = Mmds::Clock;

const Clock::time_point kNow = Clock::time_point() + 1000s;
constexpr const char* kDoc =
    R"({"latest":{"meta-data":{"ami-id":"ami-1","tags":{"a":"b"}},"user-data":"hi"},)"
    R"("age":43,"list":["x","y"]})";

TEST(MmdsDataStore, GetsObjectsAsKeyListsAndStringsAsText) {
  DataStore store;
  ASSERT_TRUE(store.put(kDoc));
  EXPECT_EQ(store.get("/latest/meta-data", OutputFormat::kImds).value(), "ami-id\ntags/");
  EXPECT_EQ(store.get("/latest//meta-data/ami-id/", OutputFormat::kImds).value(), "ami-1");
  EXPECT_EQ(store.get("/", OutputFormat::kImds).value(), "age\nlatest/\nlist");
  EXPECT_EQ(store.get("/latest/meta-data/tags", OutputFormat::kJson).value(), R"({"a":"b"})");
  EXPECT_EQ(store.get("/list/1", OutputFormat::kImds).value(), "y");
  EXPECT_EQ(store.get("/age", OutputFormat::kJson).value(), "43");
  EXPECT_EQ(store.get("/age", OutputFormat::kImds).error(), GetError::kUnsupportedValueType);
  EXPECT_EQ(store.get("/nope", OutputFormat::kJson).error(), GetError::kNotFound);
  EXPECT_EQ(store.get("/list/01", OutputFormat::kJson).error(), GetError::kNotFound);
  EXPECT_EQ(store.get("/list/9", OutputFormat::kJson).error(), GetError::kNotFound);
  EXPECT_EQ(store.get("/a~2b", OutputFormat::kJson).error(), GetError::kNotFound);
}

TEST(MmdsDataStore, PatchMergesAsRfc7396AndNeedsAPutFirst) {
  DataStore store;
  EXPECT_EQ(store.patch(R"({"a":1})").error().kind, UpdateError::kNotInitialized);
  ASSERT_TRUE(store.put(R"({"a":{"b":1,"c":2},"d":[1]})"));
  ASSERT_TRUE(store.patch(R"({"a":{"b":null,"e":{"f":"g"}},"d":{"x":1},"h":"i"})"));
  EXPECT_EQ(store.value().dump(), R"({"a":{"c":2,"e":{"f":"g"}},"d":{"x":1},"h":"i"})");
  ASSERT_TRUE(store.patch("[1,2]"));  // a patch that is no object replaces the document
  EXPECT_EQ(store.value().dump(), "[1,2]");
}

TEST(MmdsDataStore, RefusesWhatOverflowsTheLimitAndKeepsTheDocument) {
  DataStore store(32);
  ASSERT_TRUE(store.put(R"({"k":"0123456789"})"));
  const auto big = store.put(R"({"k":"0123456789012345678901234567890"})");
  EXPECT_EQ(big.error().kind, UpdateError::kTooLarge);
  EXPECT_EQ(big.error().message, "The MMDS patch request doesn't fit.");
  EXPECT_EQ(store.patch(R"({"j":"0123456789012345"})").error().kind, UpdateError::kTooLarge);
  EXPECT_EQ(store.value().dump(), R"({"k":"0123456789"})");
  // Whitespace does not count: the limit is on the compact document.
  EXPECT_TRUE(store.put("{\"k\":                                           \"v\"}"));
}

TEST(MmdsDataStore, RefusesDeepNestingAndNonJsonWithoutParsingDeep) {
  DataStore store;
  std::string deep(100000, '[');
  const auto refused = store.put(deep);
  EXPECT_EQ(refused.error().kind, UpdateError::kInvalid);
  EXPECT_NE(refused.error().message.find("more than 128 deep"), std::string::npos);
  // Brackets inside strings are text.
  EXPECT_TRUE(store.put("{\"a\":\"" + std::string(500, '[') + "\"}"));
  for (const char* bad : {"", "{", "nope", "{\"a\":1}}", "\"\\ud800\"x", "{\"a\":\xff}"}) {
    EXPECT_EQ(store.put(bad).error().kind, UpdateError::kInvalid) << bad;
  }
  std::string ok_deep =
      std::string(DataStore::kMaxDepth, '[') + std::string(DataStore::kMaxDepth, ']');
  EXPECT_TRUE(store.put(ok_deep));
}

GuestRequest request(std::string method, std::string target,
                     std::vector<std::pair<std::string, std::string>> headers = {}) {
  return GuestRequest{std::move(method), std::move(target), std::move(headers)};
}

std::string token_for(Mmds& mmds, const std::string& ttl, Clock::time_point now = kNow) {
  const auto response = mmds.answer(
      request("PUT", "/latest/api/token", {{"x-metadata-token-ttl-seconds", ttl}}), now);
  EXPECT_EQ(response.status, 200) << response.body;
  return response.body;
}

TEST(MmdsGuest, VersionTwoNeedsAValidUnexpiredToken) {
  Mmds mmds;
  mmds.configure(MmdsVersion::kV2, false);
  ASSERT_TRUE(mmds.put(kDoc));
  const auto none = mmds.answer(request("GET", "/latest/user-data"), kNow);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body,
            "No MMDS token provided. Use `X-metadata-token` header to specify the session token.");
  const std::string token = token_for(mmds, "60");
  EXPECT_EQ(token.size(), 43u);
  const auto good = mmds.answer(
      request("GET", "http://169.254.169.254/latest/user-data", {{"x-metadata-token", token}}),
      kNow + 59s);
  EXPECT_EQ(good.status, 200);
  EXPECT_EQ(good.body, "hi");
  EXPECT_EQ(good.content_type, "text/plain");
  const auto expired =
      mmds.answer(request("GET", "/latest/user-data", {{"x-metadata-token", token}}), kNow + 60s);
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(expired.body, "MMDS token not valid.");
  const auto forged =
      mmds.answer(request("GET", "/latest/user-data", {{"x-metadata-token", "x"}}), kNow);
  EXPECT_EQ(forged.status, 401);
  // EC2's header names work as well.
  const auto aws = mmds.answer(
      request("PUT", "/latest/api/token", {{"x-aws-ec2-metadata-token-ttl-seconds", "5"}}), kNow);
  ASSERT_EQ(aws.status, 200);
  EXPECT_EQ(
      mmds.answer(request("GET", "/age",
                          {{"x-aws-ec2-metadata-token", aws.body}, {"accept", "application/json"}}),
                  kNow)
          .body,
      "43");
}

TEST(MmdsGuest, TokenRequestsOutOfRangeOrMalformedAre400) {
  Mmds mmds;
  mmds.configure(MmdsVersion::kV2, false);
  for (const char* ttl : {"0", "21601", "-1", "abc", "", "99999999999"}) {
    const auto r = mmds.answer(
        request("PUT", "/latest/api/token", {{"x-metadata-token-ttl-seconds", ttl}}), kNow);
    EXPECT_EQ(r.status, 400) << ttl;
  }
  EXPECT_EQ(mmds.answer(request("PUT", "/latest/api/token"), kNow).status, 400);
  EXPECT_EQ(mmds.answer(request("PUT", "/latest/api/token",
                                {{"x-metadata-token-ttl-seconds", "10"}, {"x-forwarded-for", "a"}}),
                        kNow)
                .status,
            400);
  EXPECT_EQ(token_for(mmds, "21600").empty(), false);
  const auto elsewhere = mmds.answer(
      request("PUT", "/latest/meta-data", {{"x-metadata-token-ttl-seconds", "10"}}), kNow);
  EXPECT_EQ(elsewhere.status, 404);
  EXPECT_EQ(elsewhere.body, "Resource not found: /latest/meta-data.");
  const auto post = mmds.answer(request("POST", "/"), kNow);
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.allow, "GET, PUT");
  EXPECT_EQ(mmds.answer(request("GET", "http://169.254.169.254"), kNow).status, 400);
}

TEST(MmdsGuest, VersionOneAnswersWithoutATokenAndChecksOneGiven) {
  Mmds mmds;
  ASSERT_TRUE(mmds.put(kDoc));
  EXPECT_EQ(mmds.answer(request("GET", "/latest/meta-data/ami-id"), kNow).body, "ami-1");
  const std::string token = token_for(mmds, "10");
  EXPECT_EQ(mmds.answer(request("GET", "/age",
                                {{"x-metadata-token", token}, {"accept", "application/json"}}),
                        kNow)
                .body,
            "43");
  EXPECT_EQ(mmds.answer(request("GET", "/age", {{"x-metadata-token", "bad"}}), kNow).status, 401);
  const auto unsupported = mmds.answer(request("GET", "/age"), kNow);
  EXPECT_EQ(unsupported.status, 501);
}

TEST(MmdsGuest, ImdsCompatAnswersTextWhateverTheAcceptHeader) {
  Mmds mmds;
  mmds.configure(MmdsVersion::kV1, true);
  ASSERT_TRUE(mmds.put(kDoc));
  const auto r = mmds.answer(request("GET", "/latest", {{"accept", "application/json"}}), kNow);
  EXPECT_EQ(r.body, "meta-data/\nuser-data");
  EXPECT_EQ(r.content_type, "text/plain");
}

TEST(MmdsTokens, TheTableStaysBoundedAndDropsTheNearestExpiryFirst) {
  TokenAuthority tokens;
  const std::string longest = tokens.generate(21600, kNow).value();
  for (size_t i = 0; i < TokenAuthority::kMaxTokens + 10; ++i) {
    ASSERT_TRUE(tokens.generate(1 + static_cast<uint32_t>(i % 100), kNow));
  }
  EXPECT_EQ(tokens.size(), TokenAuthority::kMaxTokens);
  EXPECT_TRUE(tokens.is_valid(longest, kNow + 21599s));
}

TEST(MmdsGuest, ResponsesSerializeWithTheirLength) {
  GuestResponse r{.status = 401, .body = "MMDS token not valid."};
  EXPECT_EQ(r.serialize(),
            "HTTP/1.1 401 Unauthorized\r\nServer: Firecracker API\r\nContent-Type: text/plain\r\n"
            "Content-Length: 21\r\n\r\nMMDS token not valid.");
}

}  // namespace
}  // namespace dsec::mmds

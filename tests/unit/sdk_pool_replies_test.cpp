// The pool daemon's answers as the library reads them: what a well-formed answer becomes,
// and that an answer of the wrong shape (a daemon of another version, or anything else on
// the socket) is an error naming the field, never a crash or a value out of range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sdk/pool_replies.h"

namespace dsec::sdk::detail {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using json = nlohmann::json;

// As the library gets it: parsed from the daemon's text (whose non-negative numbers are
// unsigned).
json parsed(const json& value) {
  return json::parse(value.dump());
}

json a_sandbox() {
  return parsed({{"id", "sb-1"},
                 {"image", "base"},
                 {"state", "in_use"},
                 {"pid", 4711},
                 {"vsock", "/run/pool/sandboxes/sb-1.vsock"},
                 {"expires_in_ms", 899998},
                 {"idle_timeout_ms", 120000}});
}

template <typename T>
std::string error_of(const dsec::Result<T>& result) {
  return result ? std::string("(it was accepted)") : result.error().message();
}

TEST(SdkPoolReplies, ASandboxReadsWithItsLeaseAndIgnoresFieldsItDoesNotKnow) {
  json value = a_sandbox();
  value["added_by_a_newer_daemon"] = true;
  const auto sandbox = pool_sandbox_of(parsed(value));
  ASSERT_TRUE(sandbox) << sandbox.error().message();
  EXPECT_EQ(sandbox->id, "sb-1");
  EXPECT_EQ(sandbox->state, PoolSandboxState::kInUse);
  EXPECT_EQ(sandbox->pid, 4711);
  EXPECT_EQ(sandbox->vsock_path, "/run/pool/sandboxes/sb-1.vsock");
  EXPECT_EQ(sandbox->expires_in, 899998ms);
  EXPECT_EQ(sandbox->idle_timeout, 120s);
  EXPECT_FALSE(sandbox->paused);
  value["paused"] = true;
  EXPECT_TRUE(pool_sandbox_of(parsed(value))->paused);

  value.erase("expires_in_ms");
  value.erase("idle_timeout_ms");
  value["state"] = "ready";
  const auto ready = pool_sandbox_of(parsed(value));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->state, PoolSandboxState::kReady);
  EXPECT_FALSE(ready->expires_in);
  EXPECT_FALSE(ready->idle_timeout);
}

TEST(SdkPoolReplies, ASandboxOfTheWrongShapeIsAnErrorNamingTheField) {
  const auto with = [](const char* field, json v) {
    json value = a_sandbox();
    value[field] = std::move(v);
    return pool_sandbox_of(parsed(value));
  };
  EXPECT_THAT(error_of(with("state", "dreaming")), HasSubstr("unknown sandbox state"));
  EXPECT_THAT(error_of(with("pid", -1)), HasSubstr("'pid'"));
  EXPECT_THAT(error_of(with("pid", 0)), HasSubstr("no process id"));
  EXPECT_THAT(error_of(with("pid", uint64_t{1} << 40)), HasSubstr("'pid'"));
  EXPECT_THAT(error_of(with("vsock", 7)), HasSubstr("'vsock'"));
  EXPECT_THAT(error_of(with("vsock", "")), HasSubstr("'vsock'"));
  EXPECT_THAT(error_of(with("expires_in_ms", UINT64_MAX)), HasSubstr("'expires_in_ms'"));
  json no_id = a_sandbox();
  no_id.erase("id");
  EXPECT_THAT(error_of(pool_sandbox_of(no_id)), HasSubstr("'id'"));
  EXPECT_THAT(error_of(pool_sandbox_of(json::array())), HasSubstr("a sandbox"));
  EXPECT_THAT(error_of(pool_sandboxes_of(parsed({{"sandboxes", {a_sandbox(), 3}}}))),
              HasSubstr("a sandbox"));
  EXPECT_THAT(error_of(pool_sandboxes_of({{"sandbox", json::array()}})), HasSubstr("'sandboxes'"));
}

TEST(SdkPoolReplies, ImagesReadWithTheirCountsAndRefuseAWrongShape) {
  const json image =
      parsed({{"name", "base"},
              {"ready", 2},
              {"max", 8},
              {"ttl_s", 600},
              {"idle_timeout_s", 60},
              {"guest_memory_bytes", 268435456},
              {"sandboxes", {{"starting", 1}, {"ready", 2}, {"in_use", 3}, {"stopping", 0}}}});
  const auto images = pool_images_of(parsed({{"images", {image}}}));
  ASSERT_TRUE(images) << images.error().message();
  ASSERT_EQ(images->size(), 1U);
  const auto& status = images->front();
  EXPECT_EQ(status.image.name, "base");
  EXPECT_EQ(status.image.max, 8U);
  EXPECT_EQ(status.image.ttl, 600s);
  EXPECT_EQ(status.image.idle_timeout, 60s);
  EXPECT_EQ(status.guest_memory_bytes, 268435456U);
  EXPECT_EQ(status.starting, 1U);
  EXPECT_EQ(status.in_use, 3U);

  json bad = image;
  bad["sandboxes"].erase("in_use");
  EXPECT_THAT(error_of(pool_images_of(parsed({{"images", {bad}}}))), HasSubstr("'in_use'"));
  bad = image;
  bad["max"] = uint64_t{1} << 33;
  EXPECT_THAT(error_of(pool_images_of(parsed({{"images", {bad}}}))), HasSubstr("'max'"));
  bad = image;
  bad["ttl_s"] = UINT64_MAX;
  EXPECT_THAT(error_of(pool_image_of(parsed(bad))), HasSubstr("'ttl_s'"));
}

TEST(SdkPoolReplies, TheBodiesSentHoldOnlyWhatTheApiTakes) {
  EXPECT_EQ(acquire_body({.image = "base"}), json({{"image", "base"}}));
  EXPECT_EQ(acquire_body({.image = "base", .ttl = 0s, .idle_timeout = 90s}),
            json({{"image", "base"}, {"ttl_s", 0}, {"idle_timeout_s", 90}}));
  // max 0 is left to the daemon's default; the name is in the path, not the body.
  EXPECT_EQ(pool_image_body({.name = "base", .ready = 2}),
            json({{"ready", 2}, {"ttl_s", 0}, {"idle_timeout_s", 0}}));
  EXPECT_EQ(pool_image_body({.name = "base", .max = 4})["max"], 4);
}

}  // namespace
}  // namespace dsec::sdk::detail

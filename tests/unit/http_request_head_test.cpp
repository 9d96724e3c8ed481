// The Host-routed proxy's request head parser (vmm/http/request_head.h): the head whole or
// in pieces, nothing read past it, and hostile heads refused with a reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "vmm/http/request_head.h"

namespace dsec::http {
namespace {

using ::testing::HasSubstr;

TEST(RequestHead, ParsesAHeadWholeAndFindsItsHeadersInAnyCase) {
  RequestHead head;
  const auto done = head.feed(
      "GET /index.html HTTP/1.1\r\nHost:  8000-sb-1.example.com \r\n"
      "Upgrade: websocket\r\n\r\nbody bytes");
  ASSERT_TRUE(done.has_value()) << done.error().message();
  EXPECT_TRUE(*done);
  EXPECT_EQ(head.method(), "GET");
  EXPECT_EQ(head.url(), "/index.html");
  EXPECT_EQ(head.header("HOST"), "8000-sb-1.example.com");
  EXPECT_EQ(head.header("upgrade"), "websocket");
  EXPECT_EQ(head.header("cookie"), "");
}

TEST(RequestHead, ParsesAHeadThatArrivesAByteAtATime) {
  const std::string text = "POST /up HTTP/1.1\r\nHo";
  const std::string rest = "st: 80-sb-2.d\r\nContent-Length: 5\r\n\r\n";
  RequestHead head;
  for (const char c : text + rest) {
    const auto done = head.feed(std::string_view(&c, 1));
    ASSERT_TRUE(done.has_value()) << done.error().message();
    if (*done) break;
  }
  EXPECT_EQ(head.header("host"), "80-sb-2.d");
  EXPECT_EQ(head.header("content-length"), "5");
}

TEST(RequestHead, IsNotCompleteBeforeTheBlankLine) {
  RequestHead head;
  const auto done = head.feed("GET / HTTP/1.1\r\nHost: a\r\n");
  ASSERT_TRUE(done.has_value());
  EXPECT_FALSE(*done);
}

TEST(RequestHead, RefusesWhatIsNoHttpRequest) {
  RequestHead head;
  const auto done = head.feed("\x16\x03\x01\x02\x00 a TLS hello\r\n\r\n");
  ASSERT_FALSE(done.has_value());
  EXPECT_THAT(done.error().message(), HasSubstr("malformed HTTP request"));
}

TEST(RequestHead, RefusesAHeadOverItsSizeOrHeaderLimits) {
  RequestHead big(RequestHeadLimits{.max_bytes = 256, .max_headers = 100});
  auto done = big.feed("GET / HTTP/1.1\r\n");
  ASSERT_TRUE(done.has_value());
  done = big.feed("X-Filler: " + std::string(300, 'a') + "\r\n");
  ASSERT_FALSE(done.has_value());
  EXPECT_THAT(done.error().message(), HasSubstr("over"));

  RequestHead many(RequestHeadLimits{.max_bytes = 16384, .max_headers = 3});
  std::string text = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 5; ++i) text += "H" + std::to_string(i) + ": v\r\n";
  done = many.feed(text + "\r\n");
  ASSERT_FALSE(done.has_value());
  EXPECT_THAT(done.error().message(), HasSubstr("more than 3 headers"));
}

}  // namespace
}  // namespace dsec::http

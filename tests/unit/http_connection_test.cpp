// HttpConnection: bytes from a client in, requests out, answers back as bytes; split reads,
// pipelining, keep-alive, and what a hostile client cannot do (oversized headers or
// bodies, a malformed request line, unbounded buffering).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "vmm/http/connection.h"

namespace dsec::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string take_output(HttpConnection& c) {
  std::string out(c.output());
  c.consume_output(out.size());
  return out;
}

// Answers every request with 204 and returns them.
std::vector<HttpRequest> drain(HttpConnection& c) {
  std::vector<HttpRequest> requests;
  while (auto r = c.next_request()) {
    requests.push_back(*r);
    c.respond(HttpResponse::no_content());
  }
  return requests;
}

TEST(HttpConnection, ParsesARequestWithABody) {
  HttpConnection c;
  c.receive(
      "PUT /snapshot/create HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Content-Length: 13\r\n\r\n{\"a\": \"b c\"}\n");
  auto r = c.next_request();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->method, Method::kPut);
  EXPECT_EQ(r->method_text, "PUT");
  EXPECT_EQ(r->path, "/snapshot/create");
  EXPECT_EQ(r->body, "{\"a\": \"b c\"}\n");
  EXPECT_EQ(r->header("content-type"), "application/json");
  EXPECT_TRUE(r->keep_alive);
  c.respond(HttpResponse::fault("nope"));
  const auto out = take_output(c);
  EXPECT_THAT(out, StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(out, HasSubstr("Content-Length: 24\r\n"));
  EXPECT_THAT(out, HasSubstr("\r\n\r\n{\"fault_message\":\"nope\"}"));
  EXPECT_FALSE(c.finished()) << "keep-alive: the connection stays open";
  EXPECT_TRUE(c.wants_input());
}

// The phases the server's deadlines follow, and the time each allows.
TEST(HttpConnection, PhasesFollowTheRequestFromItsFirstByteToItsAnswersLastByte) {
  using Phase = HttpConnection::Phase;
  using std::chrono::milliseconds;
  HttpConnection c(HttpLimits{.max_body_bytes = 4096,
                              .idle_timeout = milliseconds(100),
                              .header_timeout = milliseconds(200),
                              .body_timeout = milliseconds(300),
                              .min_body_bytes_per_second = 1000,
                              .send_timeout = milliseconds(500)});
  EXPECT_EQ(c.phase(), Phase::kIdle);
  EXPECT_EQ(c.phase_timeout(), milliseconds(100));
  c.receive("PUT /x HT");
  EXPECT_FALSE(c.next_request());
  EXPECT_EQ(c.phase(), Phase::kHeaders);
  EXPECT_EQ(c.phase_timeout(), milliseconds(200));
  c.receive("TP/1.1\r\nContent-Length: 2000\r\n\r\nab");
  EXPECT_FALSE(c.next_request());
  EXPECT_EQ(c.phase(), Phase::kBody);
  EXPECT_EQ(c.phase_timeout(), milliseconds(300 + 1998)) << "the 1998 left at 1000 a second";
  c.receive(std::string(1998, 'b'));
  ASSERT_TRUE(c.next_request());
  EXPECT_EQ(c.phase(), Phase::kAnswering);
  EXPECT_EQ(c.phase_timeout(), milliseconds(0)) << "the handler's time";
  c.respond(HttpResponse::no_content());
  EXPECT_EQ(c.phase(), Phase::kSending);
  EXPECT_EQ(c.phase_timeout(), milliseconds(500));
  take_output(c);
  EXPECT_EQ(c.phase(), Phase::kIdle);
  // A chunked body announces no length: the largest body allowed sets its time.
  c.receive("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab");
  EXPECT_FALSE(c.next_request());
  EXPECT_EQ(c.phase(), Phase::kBody);
  EXPECT_EQ(c.phase_timeout(), milliseconds(300 + 4096));
}

TEST(HttpConnection, ARequestSplitAcrossManyReadsIsParsedWhenWhole) {
  const std::string request =
      "PATCH /vm HTTP/1.1\r\nHost: x\r\nContent-Length: 18\r\n\r\n{\"state\":\"Paused\"}";
  HttpConnection c;
  for (size_t i = 0; i + 1 < request.size(); ++i) {
    c.receive(request.substr(i, 1));
    ASSERT_FALSE(c.next_request()) << "whole after " << i + 1 << " bytes?";
  }
  c.receive(request.substr(request.size() - 1));
  auto r = c.next_request();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->method, Method::kPatch);
  EXPECT_EQ(r->body, "{\"state\":\"Paused\"}");
}

TEST(HttpConnection, PipelinedRequestsComeOneAtATimeAndAreAnsweredInOrder) {
  HttpConnection c;
  c.receive(
      "GET / HTTP/1.1\r\n\r\nGET /vm/config HTTP/1.1\r\n\r\n"
      "PUT /x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}");
  auto first = c.next_request();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->path, "/");
  EXPECT_FALSE(c.next_request()) << "the next waits until the first is answered";
  c.respond(HttpResponse::json({{"n", 1}}));
  auto second = c.next_request();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->path, "/vm/config");
  c.respond(HttpResponse::json({{"n", 2}}));
  auto third = c.next_request();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->path, "/x");
  EXPECT_EQ(third->body, "{}");
  c.respond(HttpResponse::no_content());
  const auto out = take_output(c);
  const auto one = out.find("{\"n\":1}");
  const auto two = out.find("{\"n\":2}");
  const auto three = out.find("HTTP/1.1 204 No Content");
  ASSERT_NE(one, std::string::npos);
  ASSERT_NE(two, std::string::npos);
  ASSERT_NE(three, std::string::npos);
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
}

TEST(HttpConnection, ConnectionCloseAndHttp10EndTheConnectionAfterTheAnswer) {
  for (const char* request :
       {"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", "GET / HTTP/1.0\r\n\r\n"}) {
    HttpConnection c;
    c.receive(request);
    auto r = c.next_request();
    ASSERT_TRUE(r) << request;
    EXPECT_FALSE(r->keep_alive);
    c.respond(HttpResponse::json({{"ok", true}}));
    EXPECT_THAT(std::string(c.output()), HasSubstr("Connection: close\r\n"));
    EXPECT_FALSE(c.finished()) << "not before its answer is sent";
    take_output(c);
    EXPECT_TRUE(c.finished()) << request;
  }
}

TEST(HttpConnection, Http10KeepAliveStaysOpen) {
  HttpConnection c;
  c.receive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  auto r = c.next_request();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->keep_alive);
  c.respond(HttpResponse::no_content());
  take_output(c);
  EXPECT_FALSE(c.finished());
}

TEST(HttpConnection, AMalformedRequestLineIsAnswered400AndClosesTheConnection) {
  for (const char* bad :
       {"GARBAGE\r\n\r\n", "GET\r\n\r\n", "GET / FOO/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nNo colon here\r\n\r\n", "\x01\x02\x03 / HTTP/1.1\r\n"}) {
    HttpConnection c;
    c.receive(bad);
    EXPECT_FALSE(c.next_request()) << bad;
    const auto out = take_output(c);
    EXPECT_THAT(out, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << bad;
    EXPECT_THAT(out, HasSubstr("{\"fault_message\":\"malformed HTTP request: ")) << bad;
    EXPECT_THAT(out, HasSubstr("Connection: close"));
    EXPECT_TRUE(c.finished()) << bad;
    EXPECT_FALSE(c.wants_input());
  }
}

TEST(HttpConnection, OversizedHeadersAreRefused) {
  HttpLimits limits;
  limits.max_header_bytes = 1024;
  HttpConnection c(limits);
  c.receive("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
  EXPECT_FALSE(c.next_request());
  EXPECT_THAT(take_output(c), HasSubstr("URL and headers are larger than 1024 bytes"));
  EXPECT_TRUE(c.finished());
}

TEST(HttpConnection, TooManyHeadersAreRefused) {
  HttpConnection c;
  std::string request = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) {
    request += "a:\r\n";
  }
  c.receive(request + "\r\n");
  EXPECT_FALSE(c.next_request());
  EXPECT_THAT(take_output(c), HasSubstr("more than 64 headers"));
}

TEST(HttpConnection, ABodyOverTheLimitIsRefusedBeforeItArrives) {
  HttpConnection c;  // 64 KiB
  c.receive("PUT /x HTTP/1.1\r\nContent-Length: 65537\r\n\r\n");
  EXPECT_FALSE(c.next_request());
  EXPECT_THAT(take_output(c), HasSubstr("body (65537 bytes) is larger than 65536 bytes"));
  EXPECT_TRUE(c.finished());
}

TEST(HttpConnection, AChunkedBodyOverTheLimitIsRefused) {
  HttpLimits limits;
  limits.max_body_bytes = 10;
  HttpConnection c(limits);
  c.receive(
      "PUT /x HTTP/1.1\r\nTransfer-Encoding: "
      "chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
  EXPECT_FALSE(c.next_request());
  EXPECT_THAT(take_output(c), HasSubstr("body is larger than 10 bytes"));
}

TEST(HttpConnection, AChunkedBodyWithinTheLimitIsWhole) {
  HttpConnection c;
  c.receive(
      "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  auto r = c.next_request();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "abcde");
}

TEST(HttpConnection, QueryStringsUpgradesAndOtherHttpVersionsAreRefused) {
  for (const auto& [request, why] : std::vector<std::pair<std::string, std::string>>{
           {"GET /vm?x=1 HTTP/1.1\r\n\r\n", "query strings"},
           {"CONNECT host:1 HTTP/1.1\r\n\r\n", "upgrades"},
           {"GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n", "upgrades"},
           {"GET / HTTP/2.0\r\n\r\n", "HTTP/2.0 is not supported"}}) {
    HttpConnection c;
    c.receive(request);
    EXPECT_FALSE(c.next_request()) << request;
    EXPECT_THAT(take_output(c), HasSubstr(why)) << request;
    EXPECT_TRUE(c.finished());
  }
}

TEST(HttpConnection, AbsoluteUrlsGiveTheirPath) {
  HttpConnection c;
  c.receive("GET http://localhost/vm/config HTTP/1.1\r\n\r\n");
  auto r = c.next_request();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->path, "/vm/config");
}

TEST(HttpConnection, ExpectContinueGetsA100BeforeTheBody) {
  HttpConnection c;
  c.receive("PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_FALSE(c.next_request());
  EXPECT_EQ(take_output(c), "HTTP/1.1 100 Continue\r\n\r\n");
  c.receive("{}");
  auto r = c.next_request();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "{}");
}

TEST(HttpConnection, HeadGetsTheHeadersWithoutTheBody) {
  HttpConnection c;
  c.receive("HEAD / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  auto head = c.next_request();
  ASSERT_TRUE(head);
  c.respond(HttpResponse::json({{"x", 1}}));
  const auto out = take_output(c);
  EXPECT_THAT(out, HasSubstr("Content-Length: 0\r\n"));
  EXPECT_THAT(out, ::testing::EndsWith("\r\n\r\n"));
  EXPECT_TRUE(c.next_request()) << "the connection goes on after a HEAD";
}

TEST(HttpConnection, AClientThatDoesNotReadStopsBeingRead) {
  HttpLimits limits;
  limits.max_pending_bytes = 4096;
  HttpConnection c(limits);
  std::string many;
  for (int i = 0; i < 1000; ++i) {
    many += "GET / HTTP/1.1\r\n\r\n";
  }
  c.receive(many);
  EXPECT_FALSE(c.wants_input()) << "18000 bytes wait unparsed";
  size_t answered = 0;
  while (auto r = c.next_request()) {
    c.respond(HttpResponse::json({{"padding", std::string(100, 'p')}}));
    ++answered;
  }
  EXPECT_LT(answered, 1000u);
  EXPECT_GE(c.output().size(), 4096u) << "answers pile up to the limit";
  EXPECT_LT(c.output().size(), 4096u + 300) << "and one answer more at most";
  EXPECT_FALSE(c.wants_input());
  // The client reads: the rest is answered.
  while (true) {
    take_output(c);
    auto r = c.next_request();
    if (!r) {
      break;
    }
    c.respond(HttpResponse::json({{"padding", std::string(100, 'p')}}));
    ++answered;
  }
  EXPECT_EQ(answered, 1000u);
  EXPECT_TRUE(c.wants_input());
}

TEST(HttpConnection, EndOfInputAnswersWhatCameThenCloses) {
  HttpConnection c;
  c.receive("GET / HTTP/1.1\r\n\r\nGET /vm HTTP/1.1\r\n\r\nGET /partial HT");
  c.receive_eof();
  EXPECT_FALSE(c.wants_input());
  const auto requests = drain(c);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].path, "/vm");
  take_output(c);
  EXPECT_TRUE(c.finished()) << "a part of a request is dropped with the connection";
}

TEST(HttpConnection, NothingMoreIsReadAfterARefusal) {
  HttpConnection c;
  c.receive("BAD\r\n\r\n");
  EXPECT_FALSE(c.next_request());
  c.receive("GET / HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(c.next_request());
}

}  // namespace
}  // namespace dsec::http

// The Connect codec E2B's envd plane speaks: envelopes in and out, the end-stream envelope,
// errors with their HTTP statuses, and every malformed stream refused with a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vmm/e2b/connect_codec.h"

namespace dsec::e2b {
namespace {

using ::testing::HasSubstr;

std::string header(uint8_t flags, uint32_t length) {
  return {static_cast<char>(flags), static_cast<char>(length >> 24),
          static_cast<char>((length >> 16) & 0xff), static_cast<char>((length >> 8) & 0xff),
          static_cast<char>(length & 0xff)};
}

TEST(E2bConnectCodec, CodesHaveTheProtocolsNamesAndStatuses) {
  EXPECT_EQ(code_name(ConnectCode::kNotFound), "not_found");
  EXPECT_EQ(http_status(ConnectCode::kNotFound), 404);
  EXPECT_EQ(code_name(ConnectCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(http_status(ConnectCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status(ConnectCode::kDeadlineExceeded), 504);
  EXPECT_EQ(http_status(ConnectCode::kUnauthenticated), 401);
  EXPECT_EQ(http_status(ConnectCode::kPermissionDenied), 403);
  EXPECT_EQ(http_status(ConnectCode::kResourceExhausted), 429);
  EXPECT_EQ(http_status(ConnectCode::kUnimplemented), 501);
  EXPECT_EQ(http_status(ConnectCode::kUnavailable), 503);
  EXPECT_EQ(http_status(ConnectCode::kInternal), 500);
  EXPECT_EQ(http_status(ConnectCode::kCanceled), 499);
}

TEST(E2bConnectCodec, UnaryErrorIsTheCodesStatusWithItsJson) {
  const http::HttpResponse r =
      unary_error(ConnectError{.code = ConnectCode::kNotFound, .message = "no process 7"});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(r.body),
            (nlohmann::json{{"code", "not_found"}, {"message", "no process 7"}}));
}

TEST(E2bConnectCodec, EnvelopeIsFlagsThenBigEndianLength) {
  EXPECT_EQ(encode_envelope(0, "{}"), header(0, 2) + "{}");
  EXPECT_EQ(message_envelope({{"a", 1}}), header(0, 7) + R"({"a":1})");
}

TEST(E2bConnectCodec, EndStreamCarriesNothingOrTheError) {
  EXPECT_EQ(end_stream_envelope(std::nullopt), header(kFlagEndStream, 2) + "{}");
  const std::string failed =
      end_stream_envelope(ConnectError{.code = ConnectCode::kInternal, .message = "agent gone"});
  auto decoded = decode_envelopes(failed);
  ASSERT_TRUE(decoded.has_value());
  ASSERT_EQ(decoded->size(), 1U);
  EXPECT_EQ((*decoded)[0].flags, kFlagEndStream);
  EXPECT_EQ(nlohmann::json::parse((*decoded)[0].payload)["error"]["code"], "internal");
}

TEST(E2bConnectCodec, StreamReplyRoundTrips) {
  const http::HttpResponse r = stream_reply({{{"n", 1}}, {{"n", 2}}}, std::nullopt);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/connect+json");
  auto decoded = decode_envelopes(r.body);
  ASSERT_TRUE(decoded.has_value());
  ASSERT_EQ(decoded->size(), 3U);
  EXPECT_EQ((*decoded)[1].payload, R"({"n":2})");
  EXPECT_EQ((*decoded)[2], (Envelope{.flags = kFlagEndStream, .payload = "{}"}));
}

TEST(E2bConnectCodec, StreamRequestTakesOneObject) {
  auto one = stream_request(message_envelope({{"process", {{"cmd", "ls"}}}}));
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_EQ((*one)["process"]["cmd"], "ls");
  auto with_end = stream_request(message_envelope({{"a", 1}}) + end_stream_envelope(std::nullopt));
  EXPECT_TRUE(with_end.has_value());
}

TEST(E2bConnectCodec, StreamRequestRefusesNoneOrTwoMessages) {
  auto none = stream_request("");
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ConnectCode::kInvalidArgument);
  EXPECT_THAT(none.error().message, HasSubstr("no message"));
  auto two = stream_request(message_envelope({{"a", 1}}) + message_envelope({{"a", 2}}));
  ASSERT_FALSE(two.has_value());
  EXPECT_THAT(two.error().message, HasSubstr("2 envelopes"));
}

TEST(E2bConnectCodec, RefusesAHeaderCutShort) {
  auto r = decode_envelopes(std::string("\0\0\0", 3));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ConnectCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr("5-byte header at offset 0"));
}

TEST(E2bConnectCodec, RefusesAPayloadCutShort) {
  auto r = decode_envelopes(message_envelope({{"a", 1}}) + header(0, 10) + "abc");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, HasSubstr("offset 12 says 10 bytes, but only 3 follow"));
}

TEST(E2bConnectCodec, RefusesAnOversizedFrameBeforeItsPayload) {
  auto r = decode_envelopes(header(0, 0xffffffffU));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ConnectCode::kResourceExhausted);
  EXPECT_THAT(r.error().message, HasSubstr("4294967295 bytes"));
  auto small_limit = decode_envelopes(encode_envelope(0, "0123456789"), 4);
  ASSERT_FALSE(small_limit.has_value());
  EXPECT_EQ(small_limit.error().code, ConnectCode::kResourceExhausted);
}

TEST(E2bConnectCodec, RefusesCompressedAndUnknownFlags) {
  auto compressed = decode_envelopes(encode_envelope(kFlagCompressed, "x"));
  ASSERT_FALSE(compressed.has_value());
  EXPECT_EQ(compressed.error().code, ConnectCode::kUnimplemented);
  EXPECT_THAT(compressed.error().message, HasSubstr("uncompressed"));
  auto unknown = decode_envelopes(encode_envelope(0x80, "x"));
  ASSERT_FALSE(unknown.has_value());
  EXPECT_THAT(unknown.error().message, HasSubstr("flags 0x80"));
}

TEST(E2bConnectCodec, RefusesPayloadsThatAreNotObjects) {
  auto not_json = stream_request(encode_envelope(0, "{"));
  ASSERT_FALSE(not_json.has_value());
  EXPECT_THAT(not_json.error().message, HasSubstr("not JSON"));
  auto array = unary_request("[1]");
  ASSERT_FALSE(array.has_value());
  EXPECT_THAT(array.error().message, HasSubstr("not an object"));
  auto empty = unary_request("");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->is_object());
}

TEST(E2bConnectCodec, InvalidUtf8InAMessageIsReplacedNotThrown) {
  const std::string envelope = message_envelope({{"name", std::string("\xff\xfe")}});
  auto decoded = decode_envelopes(envelope);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_TRUE(nlohmann::json::accept((*decoded)[0].payload));
}

}  // namespace
}  // namespace dsec::e2b

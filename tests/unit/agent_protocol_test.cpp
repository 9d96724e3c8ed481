#include <gtest/gtest.h>

#include <cstring>

#include "vmm/agent/protocol.h"
#include "vmm/agent/wire.h"

namespace dsec::agent {
namespace {

std::vector<uint8_t> bytes_of(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(AgentFrames, RoundTripThroughTheDecoderOneByteAtATime) {
  const auto payload = bytes_of("hello");
  auto wire = encode_frame(MessageType::kStdout, 7, payload);
  const auto second = encode_frame(MessageType::kOk, 8, {});
  wire.insert(wire.end(), second.begin(), second.end());
  ASSERT_EQ(wire.size(), 2 * kFrameHeaderSize + payload.size());

  FrameDecoder d;
  std::vector<Frame> frames;
  for (uint8_t b : wire) {
    d.feed(std::span(&b, 1));
    auto f = d.next();
    ASSERT_TRUE(f.has_value()) << f.error().message();
    if (*f) frames.push_back(**f);
  }
  ASSERT_EQ(frames.size(), 2U);
  EXPECT_EQ(frames[0], (Frame{MessageType::kStdout, 7, payload}));
  EXPECT_EQ(frames[1], (Frame{MessageType::kOk, 8, {}}));
  EXPECT_EQ(d.buffered(), 0U);
}

TEST(AgentFrames, SeveralFramesInOneFeedComeOutInOrder) {
  std::vector<uint8_t> wire;
  for (uint32_t id = 1; id <= 3; ++id) {
    const auto f = encode_frame(MessageType::kStderr, id, bytes_of(std::string(id, 'x')));
    wire.insert(wire.end(), f.begin(), f.end());
  }
  FrameDecoder d;
  d.feed(wire);
  for (uint32_t id = 1; id <= 3; ++id) {
    auto f = d.next();
    ASSERT_TRUE(f.has_value() && f->has_value());
    EXPECT_EQ((*f)->request_id, id);
    EXPECT_EQ((*f)->payload.size(), id);
  }
  auto none = d.next();
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value());
}

// Each corruption of a valid header is refused, and the decoder stays refused.
TEST(AgentFrames, BadHeadersEndTheStream) {
  struct Case {
    const char* name;
    size_t offset;
    uint8_t value;
    const char* expect;
  };
  const Case cases[] = {
      {"magic", 0, 0x00, "bad magic"},
      {"type", 4, 0x7f, "unknown message type"},
      {"flags", 6, 0x01, "flags set"},
      {"length", 15, 0x01, "over the limit"},  // length 0x01000000
  };
  for (const auto& c : cases) {
    auto wire = encode_frame(MessageType::kHealth, 1, {});
    wire[c.offset] = c.value;
    FrameDecoder d;
    d.feed(wire);
    auto f = d.next();
    ASSERT_FALSE(f.has_value()) << c.name;
    EXPECT_NE(f.error().message().find(c.expect), std::string::npos) << f.error().message();
    // A valid frame after the bad one does not resynchronise the stream.
    d.feed(encode_frame(MessageType::kHealth, 2, {}));
    EXPECT_FALSE(d.next().has_value()) << c.name;
  }
}

TEST(AgentFrames, APayloadAtTheLimitIsTakenOneOverIsNot) {
  std::vector<uint8_t> big(kMaxPayload, 0xab);
  FrameDecoder d;
  d.feed(encode_frame(MessageType::kFileData, 1, big));
  auto f = d.next();
  ASSERT_TRUE(f.has_value() && f->has_value());
  EXPECT_EQ((*f)->payload.size(), kMaxPayload);

  big.push_back(0);
  FrameDecoder over;
  over.feed(encode_frame(MessageType::kFileData, 1, big));
  EXPECT_FALSE(over.next().has_value());
}

TEST(AgentMessages, ExecRequestRoundTrips) {
  const ExecRequest m{{"/bin/sh", "-c", "echo hi"}, {"A=1", "PATH=/bin"}, "/tmp", 1500, true};
  auto back = decode_exec_request(encode(m));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, m);
}

TEST(AgentMessages, ExecRequestsThatCannotRunAreRefusedWithAReason) {
  struct Case {
    ExecRequest m;
    const char* expect;
  };
  const Case cases[] = {
      {{{}, {}, "", 0, false}, "argv is empty"},
      {{{""}, {}, "", 0, false}, "argv is empty"},
      {{{"ls"}, {"NOEQUALS"}, "", 0, false}, "not NAME=value"},
      {{{"ls"}, {"=x"}, "", 0, false}, "not NAME=value"},
      {{{"ls"}, {}, "relative/dir", 0, false}, "not absolute"},
      {{{std::string("l\0s", 3)}, {}, "", 0, false}, "NUL byte"},
  };
  for (const auto& c : cases) {
    auto r = decode_exec_request(encode(c.m));
    ASSERT_FALSE(r.has_value()) << c.expect;
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos) << r.error().message();
  }
}

TEST(AgentMessages, LengthsBeyondThePayloadOrTheLimitsAreRefusedBeforeAllocating) {
  WireWriter huge_count;
  huge_count.u32(0xffffffff);  // argv count
  auto r = decode_exec_request(huge_count.bytes());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("limit"), std::string::npos) << r.error().message();

  WireWriter short_string;
  short_string.u32(1);               // one argument...
  short_string.u32(1000);            // ...of 1000 bytes...
  short_string.raw(bytes_of("ls"));  // ...of which 2 arrived
  r = decode_exec_request(short_string.bytes());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("left"), std::string::npos) << r.error().message();

  WireWriter long_string;
  long_string.u32(1);
  long_string.u32(kMaxStringLen + 1);
  r = decode_exec_request(long_string.bytes());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("longer than the limit"), std::string::npos);
}

TEST(AgentMessages, TrailingBytesAreRefused) {
  auto payload = encode(ExitStatus{ExitStatus::Kind::kSignaled, 9});
  ASSERT_TRUE(decode_exit_status(payload).has_value());
  payload.push_back(0);
  auto r = decode_exit_status(payload);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("trailing"), std::string::npos);
}

TEST(AgentMessages, EveryOtherMessageRoundTripsAndTruncationsFail) {
  const ExitStatus exit{ExitStatus::Kind::kTimedOut, -1};
  const WriteFileRequest write{"/tmp/f", 0755, 10 << 20};
  const ReadFileRequest read{"/etc/hostname"};
  const FileInfo info{12345, 0644};
  const HealthReply health{"dsec-agent 1", 42};
  const ErrorReply error{std::string("no such file\0x", 14)};
  EXPECT_EQ(decode_exit_status(encode(exit)).value(), exit);
  EXPECT_EQ(decode_write_file_request(encode(write)).value(), write);
  EXPECT_EQ(decode_read_file_request(encode(read)).value(), read);
  EXPECT_EQ(decode_file_info(encode(info)).value(), info);
  EXPECT_EQ(decode_health_reply(encode(health)).value(), health);
  EXPECT_EQ(decode_error_reply(encode(error)).value(), error);

  // Every proper prefix of every payload is malformed.
  const auto check_prefixes = [](const std::vector<uint8_t>& p, auto decode) {
    for (size_t n = 0; n < p.size(); ++n) {
      EXPECT_FALSE(decode(std::span(p.data(), n)).has_value()) << "prefix " << n;
    }
  };
  check_prefixes(encode(exit), decode_exit_status);
  check_prefixes(encode(write), decode_write_file_request);
  check_prefixes(encode(read), decode_read_file_request);
  check_prefixes(encode(info), decode_file_info);
  check_prefixes(encode(health), decode_health_reply);
  check_prefixes(encode(error), decode_error_reply);
}

TEST(AgentMessages, FileRequestsNeedAbsolutePathsAndPlainModes) {
  EXPECT_FALSE(decode_write_file_request(encode(WriteFileRequest{"rel", 0644, 1})).has_value());
  EXPECT_FALSE(decode_write_file_request(encode(WriteFileRequest{"/x", 010000, 1})).has_value());
  EXPECT_FALSE(decode_read_file_request(encode(ReadFileRequest{""})).has_value());
  EXPECT_FALSE(
      decode_exit_status(encode(ExitStatus{static_cast<ExitStatus::Kind>(3), 0})).has_value());
}

}  // namespace
}  // namespace dsec::agent

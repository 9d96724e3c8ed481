// The MMDS network stack fed the frames a guest sends: ARP for the address, a TCP
// connection to port 80 carrying HTTP/1.1 (a token, then a GET with it), RSTs for what it
// does not serve, malformed and oversized requests answered 400, a bounded connection
// table, and random bytes that change nothing.
#include "vmm/mmds/net_stack.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace dsec::mmds {
namespace {

using namespace tcp_flags;

const MacAddr kGuestMac{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
const Ipv4Address kGuestIp{169, 254, 0, 2};
const auto kNow = Mmds::Clock::time_point() + std::chrono::seconds(100);

struct Reply {
  TcpSegment segment;
  std::string payload;
};

// The guest's side of one connection.
class GuestClient {
 public:
  GuestClient(NetStack& stack, uint16_t port, uint16_t server_port = 80)
      : stack_(stack), port_(port), server_port_(server_port) {}

  bool send(uint8_t flags, std::string_view payload = {}, std::optional<uint16_t> mss = {}) {
    const auto frame = build_tcp_frame(
        TcpOut{.source_mac = kGuestMac,
               .destination_mac = kMmdsMac,
               .source_ip = kGuestIp,
               .destination_ip = kDefaultIpv4Address,
               .source_port = port_,
               .destination_port = server_port_,
               .seq = seq_,
               .ack = ack_,
               .flags = flags,
               .window = 65535,
               .mss = mss},
        {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
    seq_ += static_cast<uint32_t>(payload.size()) + ((flags & (kSyn | kFin)) != 0 ? 1 : 0);
    return stack_.detour(frame, kNow);
  }
  // Every frame the stack has for the guest, parsed; the guest's ack follows them.
  std::vector<Reply> receive() {
    std::vector<Reply> replies;
    while (auto frame = stack_.next_frame()) {
      const auto ethernet = parse_ethernet(*frame);
      EXPECT_TRUE(ethernet.has_value());
      const auto packet = parse_ipv4(ethernet->payload);
      EXPECT_TRUE(packet.has_value());
      const auto segment = parse_tcp(*packet);  // checks our checksums too
      EXPECT_TRUE(segment.has_value());
      Reply reply{*segment, std::string(segment->payload.begin(), segment->payload.end())};
      ack_ = segment->seq + static_cast<uint32_t>(reply.payload.size()) +
             ((segment->flags & (kSyn | kFin)) != 0 ? 1 : 0);
      replies.push_back(std::move(reply));
    }
    return replies;
  }
  // Connects, sends `request`, acknowledges everything; the response's bytes.
  std::string exchange(std::string_view request) {
    EXPECT_TRUE(send(kSyn, {}, 1460));
    const auto syn_ack = receive();
    EXPECT_EQ(syn_ack.size(), 1u);
    EXPECT_EQ(syn_ack.at(0).segment.flags, kSyn | kAck);
    EXPECT_EQ(syn_ack.at(0).segment.mss, 1460);
    send(kAck);
    send(kAck | kPsh, request);
    std::string response;
    for (int round = 0; round < 100; ++round) {
      const auto replies = receive();
      if (replies.empty()) {
        break;
      }
      for (const auto& r : replies) {
        response += r.payload;
      }
      send(kAck);
    }
    return response;
  }

 private:
  NetStack& stack_;
  uint16_t port_;
  uint16_t server_port_;
  uint32_t seq_ = 1000;
  uint32_t ack_ = 0;
};

std::shared_ptr<Mmds> service(MmdsVersion version) {
  auto mmds = std::make_shared<Mmds>();
  mmds->configure(version, false);
  EXPECT_TRUE(mmds->put(R"({"latest":{"meta-data":{"id":"vm-7"}}})"));
  return mmds;
}

std::string body_of(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : response.substr(end + 4);
}

TEST(MmdsNetStack, AnswersArpForItsAddressOnly) {
  NetStack stack(service(MmdsVersion::kV1), kDefaultIpv4Address);
  std::vector<uint8_t> arp = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0, 0x12, 0x34,
                              0x56, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1, 0x52, 0x54, 0, 0x12,
                              0x34, 0x56, 169, 254, 0, 2, 0, 0, 0, 0, 0, 0, 169, 254, 169, 254};
  EXPECT_TRUE(stack.detour(arp, kNow));
  const auto reply = stack.next_frame();
  ASSERT_TRUE(reply.has_value());
  const auto parsed = parse_arp(parse_ethernet(*reply)->payload);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->operation, 2);
  EXPECT_EQ(parsed->sender_mac, kMmdsMac);
  EXPECT_EQ(parsed->sender_ip, kDefaultIpv4Address);
  EXPECT_EQ(parsed->target_ip, kGuestIp);
  arp.back() = 1;  // 169.254.169.1: the TAP's
  EXPECT_FALSE(stack.detour(arp, kNow));
  EXPECT_FALSE(stack.has_frame());
}

TEST(MmdsNetStack, ServesATokenThenTheValueOverTcp) {
  NetStack stack(service(MmdsVersion::kV2), kDefaultIpv4Address);
  GuestClient put(stack, 40000);
  const std::string token_response = put.exchange(
      "PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\n"
      "X-metadata-token-ttl-seconds: 60\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(token_response.starts_with("HTTP/1.1 200 OK\r\n")) << token_response;
  const std::string token = body_of(token_response);
  ASSERT_EQ(token.size(), 43u);
  GuestClient get(stack, 40001);
  const std::string value = get.exchange("GET /latest/meta-data/id HTTP/1.1\r\nX-metadata-token: " +
                                         token + "\r\n\r\n");
  EXPECT_TRUE(value.starts_with("HTTP/1.1 200 OK\r\n")) << value;
  EXPECT_EQ(body_of(value), "vm-7");
  GuestClient anonymous(stack, 40002);
  EXPECT_TRUE(anonymous.exchange("GET /latest/meta-data/id HTTP/1.1\r\n\r\n")
                  .starts_with("HTTP/1.1 401 Unauthorized\r\n"));
}

TEST(MmdsNetStack, SendsALargeAnswerInSegmentsOfTheGuestsMss) {
  auto mmds = service(MmdsVersion::kV1);
  ASSERT_TRUE(mmds->put(R"({"big":")" + std::string(20000, 'x') + R"("})"));
  NetStack stack(mmds, kDefaultIpv4Address);
  GuestClient client(stack, 40003);
  const std::string response = client.exchange("GET /big HTTP/1.1\r\n\r\n");
  EXPECT_EQ(body_of(response), std::string(20000, 'x'));
}

TEST(MmdsNetStack, ResetsOtherPortsAndSegmentsOfNoConnection) {
  NetStack stack(service(MmdsVersion::kV1), kDefaultIpv4Address);
  GuestClient other_port(stack, 40004, 22);
  EXPECT_TRUE(other_port.send(kSyn));
  auto replies = other_port.receive();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].segment.flags, kRst | kAck);
  GuestClient stray(stack, 40005);
  EXPECT_TRUE(stray.send(kAck, "GET / HTTP/1.1\r\n\r\n"));
  replies = stray.receive();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].segment.flags, kRst);
  EXPECT_EQ(stack.connection_count(), 0u);
}

TEST(MmdsNetStack, AnswersMalformedAndOversizedRequestsWith400AndCloses) {
  NetStack stack(service(MmdsVersion::kV1), kDefaultIpv4Address);
  GuestClient garbage(stack, 40006);
  EXPECT_TRUE(garbage.exchange("\x01\x02 nonsense\r\n\r\n").starts_with("HTTP/1.1 400"));
  GuestClient huge(stack, 40007);
  EXPECT_TRUE(huge.exchange("GET /" + std::string(20000, 'a')).starts_with("HTTP/1.1 400"));
  GuestClient body(stack, 40008);
  EXPECT_TRUE(body.exchange("PUT / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n")
                  .starts_with("HTTP/1.1 400"));
  GuestClient chunked(stack, 40009);
  EXPECT_TRUE(chunked.exchange("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
                  .starts_with("HTTP/1.1 400"));
}

TEST(MmdsNetStack, KeepsItsConnectionTableBounded) {
  NetStack stack(service(MmdsVersion::kV1), kDefaultIpv4Address);
  for (uint16_t port = 1000; port < 1100; ++port) {
    GuestClient client(stack, port);
    client.send(kSyn);
  }
  EXPECT_EQ(stack.connection_count(), NetStack::kMaxConnections);
  while (stack.next_frame()) {
  }
}

TEST(MmdsNetStack, TakesFramesForItsAddressAndPassesTheRest) {
  NetStack stack(service(MmdsVersion::kV1), kDefaultIpv4Address);
  auto frame = build_tcp_frame(TcpOut{.source_mac = kGuestMac,
                                      .destination_mac = kMmdsMac,
                                      .source_ip = kGuestIp,
                                      .destination_ip = {10, 0, 0, 1},
                                      .source_port = 1,
                                      .destination_port = 80,
                                      .flags = kSyn},
                               {});
  EXPECT_FALSE(stack.detour(frame, kNow));
  frame[kEthernetHeader + 19] = 254;  // 10.0.0.254: still not ours (and a bad checksum)
  EXPECT_FALSE(stack.detour(frame, kNow));
  // Random frames: nothing crashes, and what is answered parses.
  std::mt19937 random(7);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes(random() % 200);
    for (auto& b : bytes) {
      b = static_cast<uint8_t>(random());
    }
    if (bytes.size() > 34 && i % 2 == 0) {  // aimed at the address, mostly dropped
      bytes[12] = 0x08;
      bytes[13] = 0x00;
      bytes[14] = 0x45;
      std::copy(kDefaultIpv4Address.begin(), kDefaultIpv4Address.end(), bytes.begin() + 30);
    }
    stack.detour(bytes, kNow);
    while (stack.next_frame()) {
    }
  }
  EXPECT_LE(stack.connection_count(), NetStack::kMaxConnections);
}

}  // namespace
}  // namespace dsec::mmds

namespace dsec::mmds {
namespace {

// A guest that took checksum offload sends its TCP segment with the pseudo-header's sum in
// the checksum field (VIRTIO_NET_HDR_F_NEEDS_CSUM): the device completes it before the
// stack, which checks every checksum, reads the segment.
TEST(MmdsFrames, APartialChecksumIsCompletedAsANicWouldAndBadOffsetsChangeNothing) {
  const std::string payload = "GET / HTTP/1.1\r\n\r\n";
  auto frame = build_tcp_frame(
      TcpOut{.source_mac = kGuestMac, .destination_mac = kMmdsMac, .source_ip = kGuestIp,
             .destination_ip = kDefaultIpv4Address, .source_port = 4000, .destination_port = 80,
             .seq = 1, .ack = 1, .flags = tcp_flags::kAck, .window = 65535, .mss = {}},
      {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
  const auto whole = frame;
  constexpr size_t kTcpStart = 14 + 20;
  constexpr size_t kChecksumOffset = 16;
  const size_t tcp_length = frame.size() - kTcpStart;
  const std::array<uint8_t, 12> pseudo{169, 254, 0,   2, 169, 254, 169, 254, 0, 6,
                                       static_cast<uint8_t>(tcp_length >> 8),
                                       static_cast<uint8_t>(tcp_length)};
  const uint32_t partial = checksum_add(pseudo);
  frame[kTcpStart + kChecksumOffset] = static_cast<uint8_t>(partial >> 8);
  frame[kTcpStart + kChecksumOffset + 1] = static_cast<uint8_t>(partial);
  const auto left_partial = frame;

  // Left partial, the stack drops the segment as corrupt; completed, it reads it (and
  // resets it: no connection has it).
  NetStack stack(service(MmdsVersion::kV1), kDefaultIpv4Address);
  EXPECT_TRUE(stack.detour(frame, kNow));
  EXPECT_FALSE(stack.next_frame().has_value());
  complete_partial_checksum(frame, kTcpStart, kChecksumOffset);
  EXPECT_EQ(frame, whole);
  EXPECT_TRUE(stack.detour(frame, kNow));
  EXPECT_TRUE(stack.next_frame().has_value());

  for (const auto& [start, offset] : {std::pair<size_t, size_t>{frame.size(), 0},
                                     {kTcpStart, frame.size()},
                                     {frame.size() - 1, 0},
                                     {SIZE_MAX, 2}}) {
    auto bad = left_partial;
    complete_partial_checksum(bad, start, offset);
    EXPECT_EQ(bad, left_partial) << start << " " << offset;
  }
}

}  // namespace
}  // namespace dsec::mmds

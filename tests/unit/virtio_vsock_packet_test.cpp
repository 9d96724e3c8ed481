// virtio-vsock packets as the guest lays them out (virtio 1.2, 5.10.6): well-formed tx
// chains come out as the guest meant them, every malformed one is refused with a reason,
// and rx packets land in the guest's buffers at the spec's offsets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/devices/virtio/vsock/packet.h"
#include "vmm/devices/virtio/vsock/unix_socket.h"

#ifndef EXPECT_OK
#define EXPECT_OK(expr) EXPECT_TRUE((expr).has_value())
#endif

namespace dsec::virtio::vsock {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kGuestCid = 3;
constexpr uint64_t kHeaderAt = 0x1000;
constexpr uint64_t kPayloadAt = 0x10000;

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, 1 * kMiB}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

// The header bytes a guest driver writes: struct virtio_vsock_hdr, packed little-endian.
std::array<uint8_t, 44> raw_header(uint64_t src_cid, uint64_t dst_cid, uint32_t len,
                                   uint16_t type = 1, uint16_t op = 5) {
  std::array<uint8_t, 44> b{};
  const auto put = [&b](size_t at, auto value) {
    std::memcpy(b.data() + at, &value, sizeof(value));
  };
  put(0, src_cid);
  put(8, dst_cid);
  put(16, uint32_t{1234});  // src_port
  put(20, uint32_t{80});    // dst_port
  put(24, len);
  put(28, type);
  put(30, op);
  put(32, uint32_t{0});      // flags
  put(36, uint32_t{65536});  // buf_alloc
  put(40, uint32_t{100});    // fwd_cnt
  return b;
}

class VsockPacketTest : public ::testing::Test {
 protected:
  // A chain of one header descriptor and one payload descriptor of `payload` bytes.
  DescriptorChain tx_chain(const std::array<uint8_t, 44>& header, uint64_t payload) {
    EXPECT_OK(memory_.write(kHeaderAt, header));
    DescriptorChain chain{.head = 7, .readable = {{kHeaderAt, 44}}, .writable = {}};
    if (payload != 0) {
      chain.readable.push_back({kPayloadAt, payload});
    }
    return chain;
  }

  void expect_refused(const DescriptorChain& chain, const std::string& reason) {
    auto packet = parse_tx_packet(memory_, chain, kGuestCid);
    ASSERT_FALSE(packet.has_value()) << "accepted a packet that should fail with: " << reason;
    EXPECT_THAT(packet.error().message(), HasSubstr(reason));
  }

  GuestMemory memory_ = make_memory();
};

TEST_F(VsockPacketTest, AWellFormedPacketYieldsItsHeaderAndPayload) {
  auto packet = parse_tx_packet(memory_, tx_chain(raw_header(kGuestCid, 2, 5), 5), kGuestCid);
  ASSERT_OK(packet);
  const VsockHeader& h = packet->header;
  EXPECT_EQ(h.src_cid, kGuestCid);
  EXPECT_EQ(h.dst_cid, kHostCid);
  EXPECT_EQ(h.src_port, 1234U);
  EXPECT_EQ(h.dst_port, 80U);
  EXPECT_EQ(h.len, 5U);
  EXPECT_EQ(h.type, kTypeStream);
  EXPECT_EQ(h.op, kOpRw);
  EXPECT_EQ(h.buf_alloc, 65536U);
  EXPECT_EQ(h.fwd_cnt, 100U);
  EXPECT_THAT(packet->payload, ElementsAre(GuestRange{kPayloadAt, 5}));
}

TEST_F(VsockPacketTest, AHeaderSplitAcrossDescriptorsAndSharingOneWithThePayloadIsRead) {
  const auto header = raw_header(kGuestCid, 2, 6);
  // 10 header bytes in one buffer; 34 header bytes and 6 payload bytes in the next.
  ASSERT_OK(memory_.write(kHeaderAt, std::span(header).first(10)));
  ASSERT_OK(memory_.write(kPayloadAt, std::span(header).subspan(10)));
  const DescriptorChain chain{
      .head = 1, .readable = {{kHeaderAt, 10}, {kPayloadAt, 40}}, .writable = {}};
  auto packet = parse_tx_packet(memory_, chain, kGuestCid);
  ASSERT_OK(packet);
  EXPECT_EQ(packet->header, decode_header(header));
  EXPECT_THAT(packet->payload, ElementsAre(GuestRange{kPayloadAt + 34, 6}));
}

TEST_F(VsockPacketTest, AShortHeaderIsRefused) {
  DescriptorChain chain = tx_chain(raw_header(kGuestCid, 2, 0), 0);
  chain.readable[0].size = 43;
  expect_refused(chain, "43 readable bytes, less than the 44-byte header");
  chain.readable.clear();
  chain.writable.push_back({kHeaderAt, 44});  // writable bytes do not count
  expect_refused(chain, "0 readable bytes");
}

TEST_F(VsockPacketTest, ALengthThatDiffersFromThePayloadIsRefused) {
  expect_refused(tx_chain(raw_header(kGuestCid, 2, 10), 5),
                 "header says 10 payload bytes, the chain holds 5");
  expect_refused(tx_chain(raw_header(kGuestCid, 2, 5), 10),
                 "header says 5 payload bytes, the chain holds 10");
  expect_refused(tx_chain(raw_header(kGuestCid, 2, 0), 1), "header says 0 payload bytes");
}

TEST_F(VsockPacketTest, ALengthAboveTheBoundIsRefused) {
  expect_refused(tx_chain(raw_header(kGuestCid, 2, kMaxPayload + 1), kMaxPayload + 1),
                 "payload length 65537 is above the 65536-byte limit");
  expect_refused(tx_chain(raw_header(kGuestCid, 2, UINT32_MAX), 5), "above the 65536-byte limit");
  EXPECT_OK(parse_tx_packet(memory_, tx_chain(raw_header(kGuestCid, 2, kMaxPayload), kMaxPayload),
                            kGuestCid));
}

TEST_F(VsockPacketTest, AForgedSourceCidIsRefused) {
  expect_refused(tx_chain(raw_header(4, 2, 0), 0), "source CID 4 is not the guest's (3)");
  expect_refused(tx_chain(raw_header(2, 2, 0), 0), "source CID 2");
}

TEST_F(VsockPacketTest, ADestinationOtherThanTheHostIsRefused) {
  expect_refused(tx_chain(raw_header(kGuestCid, 3, 0), 0),
                 "destination CID 3 is not the host's (2)");
  expect_refused(tx_chain(raw_header(kGuestCid, 0xffffffff, 0), 0), "destination CID 4294967295");
}

TEST_F(VsockPacketTest, ANonStreamTypeParsesForTheMuxerToReset) {
  auto packet =
      parse_tx_packet(memory_, tx_chain(raw_header(kGuestCid, 2, 0, /*type=*/2), 0), kGuestCid);
  ASSERT_OK(packet);
  EXPECT_EQ(packet->header.type, 2);
}

TEST_F(VsockPacketTest, AChainOutsideGuestMemoryIsRefusedNotRead) {
  const DescriptorChain chain{.head = 1, .readable = {{2 * kMiB, 44}}, .writable = {}};
  EXPECT_FALSE(parse_tx_packet(memory_, chain, kGuestCid).has_value());
}

TEST_F(VsockPacketTest, RxPacketsLandAtTheSpecsOffsetsAcrossBuffers) {
  // 20 header bytes in the first buffer, the rest and the payload in the second.
  const DescriptorChain chain{
      .head = 3, .readable = {}, .writable = {{kHeaderAt, 20}, {kPayloadAt, 100}}};
  EXPECT_EQ(rx_payload_capacity(chain).value(), 120U - 44U);
  const VsockHeader header{.src_cid = 2,
                           .dst_cid = 3,
                           .src_port = 1 << 30,
                           .dst_port = 52,
                           .len = 999 /* replaced */,
                           .type = 1,
                           .op = kOpRw,
                           .flags = 0,
                           .buf_alloc = 4096,
                           .fwd_cnt = 17};
  const std::string data = "hello, guest";
  auto used =
      write_rx_packet(memory_, chain, header,
                      std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  ASSERT_OK(used);
  EXPECT_EQ(*used, 44U + data.size());
  std::array<uint8_t, 44> bytes{};
  ASSERT_OK(memory_.read(kHeaderAt, std::span(bytes).first(20)));
  ASSERT_OK(memory_.read(kPayloadAt, std::span(bytes).subspan(20)));
  VsockHeader expected = header;
  expected.len = static_cast<uint32_t>(data.size());
  EXPECT_EQ(decode_header(bytes), expected);
  uint32_t len_field = 0;
  std::memcpy(&len_field, bytes.data() + 24, 4);
  EXPECT_EQ(len_field, data.size());
  std::string got(data.size(), '\0');
  ASSERT_OK(
      memory_.read(kPayloadAt + 24, std::span(reinterpret_cast<uint8_t*>(got.data()), got.size())));
  EXPECT_EQ(got, data);
}

TEST_F(VsockPacketTest, RxChainsWithReadOnlyBuffersOrNoRoomAreRefused) {
  const DescriptorChain readonly{
      .head = 1, .readable = {{kHeaderAt, 64}}, .writable = {{kPayloadAt, 4096}}};
  auto capacity = rx_payload_capacity(readonly);
  ASSERT_FALSE(capacity.has_value());
  EXPECT_THAT(capacity.error().message(), HasSubstr("device-readable"));
  EXPECT_FALSE(write_rx_packet(memory_, readonly, {}, {}).has_value());

  const DescriptorChain tiny{.head = 2, .readable = {}, .writable = {{kHeaderAt, 43}}};
  auto small = write_rx_packet(memory_, tiny, {}, {});
  ASSERT_FALSE(small.has_value());
  EXPECT_THAT(small.error().message(), HasSubstr("43 writable bytes"));

  const DescriptorChain exact{.head = 3, .readable = {}, .writable = {{kHeaderAt, 50}}};
  const std::array<uint8_t, 7> seven{};
  auto over = write_rx_packet(memory_, exact, {}, seven);
  ASSERT_FALSE(over.has_value());
  EXPECT_THAT(over.error().message(), HasSubstr("takes 6 payload bytes, not 7"));
  EXPECT_OK(write_rx_packet(memory_, exact, {}, std::span(seven).first(6)));
}

TEST_F(VsockPacketTest, RxCapacityIsBoundedToTheMaximumPayload) {
  const DescriptorChain huge{.head = 1, .readable = {}, .writable = {{0, 1 * kMiB}}};
  EXPECT_EQ(rx_payload_capacity(huge).value(), kMaxPayload);
  auto iovecs = rx_payload_iovecs(memory_, huge, UINT32_MAX);
  ASSERT_OK(iovecs);
  uint64_t total = 0;
  for (const iovec& v : *iovecs) {
    total += v.iov_len;
  }
  EXPECT_EQ(total, kMaxPayload);
}

TEST(VsockConnectLine, OnlyAnExactConnectLineGivesAPort) {
  EXPECT_EQ(parse_connect_line("CONNECT 52\n"), 52U);
  EXPECT_EQ(parse_connect_line("CONNECT 0\n"), 0U);
  EXPECT_EQ(parse_connect_line("CONNECT 4294967295\n"), 4294967295U);
  for (const char* bad : {"CONNECT 4294967296\n", "CONNECT \n", "CONNECT -1\n", "CONNECT +1\n",
                          "CONNECT 052\n", "CONNECT 52", "connect 52\n", "CONNECT 52 \n",
                          "CONNECT  52\n", "CONNECT 5x\n", "CONNECT 99999999999\n", "\n", ""}) {
    EXPECT_EQ(parse_connect_line(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace dsec::virtio::vsock

// virtio-net as a guest driver sees it, with a SOCK_SEQPACKET socket pair standing in for
// the TAP (one frame per read and write, like a TAP): what the host end receives of the
// guest's tx chains, what lands in the guest's rx buffers, and what malformed chains do.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/virtq_driver.h"
#include "tests/unit/virtio_net_fixture.h"
#include "vmm/devices/virtio/net/net.h"
#include "vmm/io/event_loop.h"

namespace dsec::virtio {
namespace {

// One frame each way per 400 ms: the first goes at once, the others wait for the
// limiter's timer, which turns up on the loop without the guest or the host doing more.
class VirtioNetRateLimitedTest : public VirtioNetTest {
 protected:
  VirtioNetRateLimitedTest() {
    const devices::TokenBucketConfig one_per_400ms{
        .size = 1, .one_time_burst = 0, .refill_time_ms = 400};
    limiters_.rx.ops = one_per_400ms;
    limiters_.tx.ops = one_per_400ms;
  }
};

TEST_F(VirtioNetRateLimitedTest, TxFramesBeyondTheLimitWaitInTheRingThenGoInOrder) {
  for (uint16_t i = 0; i < 3; ++i) {
    const auto frame = frame_of(60, static_cast<uint8_t>(i));
    const uint64_t at = kBuf + i * 0x200;
    ASSERT_OK(memory_.fill(at, VirtioNet::kHeaderSize, 0));
    ASSERT_OK(memory_.write(at + VirtioNet::kHeaderSize, frame));
    tx_.set_desc(i, at, static_cast<uint32_t>(VirtioNet::kHeaderSize + frame.size()), 0);
    tx_.publish(i);
  }
  net_->notify(VirtioNet::kTxQueue);
  net_->notify(VirtioNet::kTxQueue);  // asking again takes nothing more
  EXPECT_EQ(tx_.used_idx(), 1);
  EXPECT_EQ(queues_[VirtioNet::kTxQueue].state().next_avail, 1);
  ASSERT_TRUE(turn_until([&] { return tx_.used_idx() == 3; }));
  for (uint8_t i = 0; i < 3; ++i) {
    std::vector<uint8_t> got(2048);
    const ssize_t n = ::recv(peer_.get(), got.data(), got.size(), 0);
    ASSERT_EQ(n, 60) << "frame " << int{i};
    got.resize(60);
    EXPECT_EQ(got, frame_of(60, i)) << "frame " << int{i};
  }
}

TEST_F(VirtioNetRateLimitedTest, RxFramesBeyondTheLimitWaitThenReachTheGuestInOrder) {
  for (uint16_t d = 0; d < 4; ++d) {
    rx_.set_desc(d, kBuf + d * 0x100, 0x100, kWrite);
    rx_.publish(d);
  }
  net_->notify(VirtioNet::kRxQueue);
  pump();
  for (uint8_t i = 0; i < 3; ++i) {
    send_from_host(frame_of(64, i));
  }
  ASSERT_TRUE(turn_until([&] { return rx_.used_idx() >= 1; }));
  EXPECT_EQ(rx_.used_idx(), 1);  // the others wait for tokens
  ASSERT_TRUE(turn_until([&] { return rx_.used_idx() == 3; }));
  for (uint16_t n = 0; n < 3; ++n) {
    const auto used = rx_.used_elem(n);
    EXPECT_EQ(used.len, 12U + 64U);
    EXPECT_EQ(bytes_at(kBuf + used.id * 0x100 + 12, 64), frame_of(64, static_cast<uint8_t>(n)))
        << "frame " << n;
  }
}

TEST_F(VirtioNetTest, IsANetDeviceWithMacAndLinkUpStatus) {
  EXPECT_EQ(net_->device_type(), 1u);
  EXPECT_THAT(net_->queue_max_sizes(), ::testing::ElementsAre(256, 256));
  EXPECT_NE(net_->features() & (uint64_t{1} << 5), 0u);
  EXPECT_NE(net_->features() & (uint64_t{1} << 16), 0u);
  std::array<uint8_t, 8> config{};
  net_->read_config(0, config);
  EXPECT_THAT(config, ::testing::ElementsAre(0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 1, 0));
}

TEST_F(VirtioNetTest, TxFrameReachesTheTapWithoutTheHeader) {
  const auto frame = frame_of(60, 7);
  ASSERT_OK(memory_.fill(kBuf, VirtioNet::kHeaderSize, 0xee));
  ASSERT_OK(memory_.write(kBuf + 0x100, frame));
  tx_.set_desc(0, kBuf, VirtioNet::kHeaderSize, kNext, 1);
  tx_.set_desc(1, kBuf + 0x100, static_cast<uint32_t>(frame.size()), 0);
  tx_.publish(0);
  net_->notify(VirtioNet::kTxQueue);
  pump();
  std::vector<uint8_t> got(70000);
  const ssize_t n = ::recv(peer_.get(), got.data(), got.size(), 0);
  ASSERT_EQ(n, static_cast<ssize_t>(frame.size()));
  got.resize(static_cast<size_t>(n));
  EXPECT_EQ(got, frame);
  EXPECT_EQ(tx_.used_idx(), 1);
  EXPECT_EQ(tx_.used_elem(0), (UsedElem{0, 0}));
  EXPECT_GT(raised_, 0);
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioNetTest, RxFrameLandsAfterAHeaderWithOneBuffer) {
  ASSERT_OK(memory_.fill(kBuf, 4096, 0xee));
  rx_.set_desc(0, kBuf, 2048, kWrite);
  rx_.publish(0);
  net_->notify(VirtioNet::kRxQueue);
  pump();
  const auto frame = frame_of(100, 3);
  send_from_host(frame);
  pump();
  ASSERT_EQ(rx_.used_idx(), 1);
  EXPECT_EQ(rx_.used_elem(0), (UsedElem{0, 112}));
  std::vector<uint8_t> header(12, 0);
  header[10] = 1;
  EXPECT_EQ(bytes_at(kBuf, 12), header);
  EXPECT_EQ(bytes_at(kBuf + 12, 100), frame);
  EXPECT_GT(raised_, 0);
}

TEST_F(VirtioNetTest, RxFrameWaitsForABufferUntilTheGuestNotifies) {
  const auto frame = frame_of(80, 9);
  send_from_host(frame);
  pump();
  EXPECT_EQ(rx_.used_idx(), 0);
  // A chain split across two buffers, the header alone in the first.
  rx_.set_desc(0, kBuf, 12, kWrite | kNext, 1);
  rx_.set_desc(1, kBuf + 0x1000, 1500, kWrite);
  rx_.publish(0);
  net_->notify(VirtioNet::kRxQueue);
  pump();
  ASSERT_EQ(rx_.used_idx(), 1);
  EXPECT_EQ(rx_.used_elem(0), (UsedElem{0, 92}));
  EXPECT_EQ(bytes_at(kBuf + 0x1000, 80), frame);
  // And the TAP is watched again.
  const auto second = frame_of(60, 1);
  rx_.set_desc(2, kBuf + 0x2000, 2048, kWrite);
  rx_.publish(2);
  send_from_host(second);
  pump();
  ASSERT_EQ(rx_.used_idx(), 2);
  EXPECT_EQ(bytes_at(kBuf + 0x2000 + 12, 60), second);
}

// What a guest that gives no rx buffers makes the device hold: the one frame it read
// (VirtioNet::kMaxFrameSize bytes, allocated once). The rest wait in the TAP, in the
// kernel's queue, and reach the guest in order once it gives buffers again.
TEST_F(VirtioNetTest, AGuestWithoutRxBuffersLeavesFramesInTheTapAndGetsThemInOrder) {
  constexpr uint8_t kFrames = 20;
  for (uint8_t i = 0; i < kFrames; ++i) {
    send_from_host(frame_of(64, i));
  }
  pump();
  EXPECT_EQ(rx_.used_idx(), 0);
  uint16_t delivered = 0;
  while (delivered < kFrames) {
    for (uint16_t d = 0; d < 8; ++d) {
      rx_.set_desc(d, kBuf + d * 0x100, 0x100, kWrite);
      rx_.publish(d);
    }
    net_->notify(VirtioNet::kRxQueue);
    pump();
    const uint16_t now = rx_.used_idx();
    ASSERT_GT(now, delivered) << "no frame delivered";
    for (uint16_t n = delivered; n < now; ++n) {
      const auto used = rx_.used_elem(n);
      EXPECT_EQ(used.len, 12U + 64U);
      EXPECT_EQ(bytes_at(kBuf + used.id * 0x100 + 12, 64), frame_of(64, static_cast<uint8_t>(n)))
          << "frame " << n;
    }
    delivered = now;
    if (delivered % 8 != 0) {
      break;
    }
  }
  EXPECT_EQ(delivered, kFrames);
}

TEST_F(VirtioNetTest, AFrameTooBigForTheRxChainIsDropped) {
  rx_.set_desc(0, kBuf, 64, kWrite);
  rx_.set_desc(1, kBuf + 0x1000, 2048, kWrite);
  rx_.publish(0);
  rx_.publish(1);
  net_->notify(VirtioNet::kRxQueue);
  pump();
  send_from_host(frame_of(100, 1));
  pump();
  ASSERT_EQ(rx_.used_idx(), 1);
  EXPECT_EQ(rx_.used_elem(0), (UsedElem{0, 0}));
  const auto next = frame_of(50, 2);
  send_from_host(next);
  pump();
  ASSERT_EQ(rx_.used_idx(), 2);
  EXPECT_EQ(rx_.used_elem(1), (UsedElem{1, 62}));
  EXPECT_EQ(bytes_at(kBuf + 0x1000 + 12, 50), next);
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioNetTest, ATxChainShorterThanTheHeaderBreaksTheQueue) {
  tx_.set_desc(0, kBuf, 8, 0);
  tx_.publish(0);
  net_->notify(VirtioNet::kTxQueue);
  pump();
  EXPECT_TRUE(interrupt_->needs_reset());
  EXPECT_EQ(tx_.used_idx(), 0);
  std::array<uint8_t, 16> got{};
  EXPECT_LT(::recv(peer_.get(), got.data(), got.size(), 0), 0);
}

TEST(VirtioNetParse, MacAndCidr) {
  auto mac = parse_mac("52:54:00:12:34:56");
  ASSERT_OK(mac);
  EXPECT_EQ(format_mac(*mac), "52:54:00:12:34:56");
  EXPECT_FALSE(parse_mac("52:54:00:12:34").has_value());
  EXPECT_FALSE(parse_mac("01:00:00:00:00:00").has_value());
  auto cidr = parse_ipv4_cidr("10.99.3.1/24");
  ASSERT_OK(cidr);
  EXPECT_EQ(cidr->address, 0x0a630301u);
  EXPECT_EQ(cidr->prefix, 24);
  EXPECT_FALSE(parse_ipv4_cidr("10.99.3.1").has_value());
  EXPECT_FALSE(parse_ipv4_cidr("10.99.3.1/33").has_value());
}

TEST(VirtioNetTap, ADescriptorHandedInThatIsNotATapIsRefused) {
  using ::testing::AllOf;
  using ::testing::HasSubstr;
  int fds[2] = {-1, -1};
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const UniqueFd read_end(fds[0]);
  const UniqueFd write_end(fds[1]);
  const auto tap = Tap::open({.name = "", .host_ip = std::nullopt, .handed_in_fd = fds[0]});
  ASSERT_FALSE(tap);
  EXPECT_THAT(tap.error().message(),
              AllOf(HasSubstr("--net fd=" + std::to_string(fds[0]) + ": TUNGETIFF"),
                    HasSubstr("hand in a descriptor of /dev/net/tun attached to a TAP")));
}

}  // namespace
}  // namespace dsec::virtio

// The vsock muxer on its own (muxer.h), driven as the device drives it, with rx buffers of
// sizes a Linux driver never posts.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/devices/virtio/vsock/muxer.h"
#include "vmm/devices/virtio/vsock/packet.h"
#include "vmm/devices/virtio/vsock/unix_socket.h"

namespace dsec::virtio::vsock {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kGuestCid = 3;
constexpr uint64_t kRxAt = 0x1000;

class VsockMuxerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(listener_, io::listen_unix(uds_ + "_1"));
    ASSERT_OK_AND_ASSIGN(muxer_, Muxer::create(loop_, uds_, kGuestCid, mutex_, [] {}));
    muxer_->activate();
  }

  void TearDown() override {
    const std::lock_guard lock(mutex_);
    muxer_->deactivate();
    muxer_->purge();
  }

  // A packet with `op` from guest port 1024 to host port 1, where listener_ waits.
  void guest_sends(uint16_t op) {
    const VsockHeader packet{.src_cid = kGuestCid,
                             .dst_cid = kHostCid,
                             .src_port = 1024,
                             .dst_port = 1,
                             .len = 0,
                             .type = kTypeStream,
                             .op = op,
                             .flags = 0,
                             .buf_alloc = 65536,
                             .fwd_cnt = 0};
    const std::lock_guard lock(mutex_);
    muxer_->on_guest_packet(memory_, TxPacket{packet, {}});
  }
  void guest_connects() { guest_sends(kOpRequest); }

  // What the muxer puts in an rx buffer of `size` bytes: its header, or nullopt for none.
  std::optional<VsockHeader> fill(uint32_t size) {
    const DescriptorChain chain{.head = 0, .readable = {}, .writable = {{kRxAt, size}}};
    const std::lock_guard lock(mutex_);
    auto written = muxer_->fill_rx(memory_, chain);
    EXPECT_TRUE(written.has_value());
    if (!written || *written == 0) return std::nullopt;
    std::array<uint8_t, kHeaderSize> bytes{};
    EXPECT_TRUE(memory_.read(kRxAt, bytes).has_value());
    return decode_header(bytes);
  }

  void turn_loop() { ASSERT_OK(loop_.run_once(100ms)); }

  test::TempDir dir_;
  std::string uds_ = dir_.file("v.sock");
  io::EventLoop loop_ = std::move(io::EventLoop::create(64).value());
  std::mutex mutex_;
  UniqueFd listener_;
  std::unique_ptr<Muxer> muxer_;
  GuestMemory memory_ =
      std::move(GuestMemory::anonymous(std::array<GuestRange, 1>{{{0, 0x10000}}}).value());
};

TEST_F(VsockMuxerTest, ABufferWithRoomForAHeaderOnlyDoesNotStallTheMuxerWhenDataIsOwed) {
  guest_connects();
  const auto response = fill(4096);
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->op, kOpResponse);
  UniqueFd host(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(host);
  ASSERT_EQ(::send(host.get(), "data", 4, 0), 4);
  turn_loop();  // the muxer sees the host socket readable: data is owed to the guest
  // A buffer of exactly one header has no room for data: nothing goes in it, and the call
  // returns (it looped for ever before).
  EXPECT_FALSE(fill(kHeaderSize).has_value());
  const auto data = fill(4096);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->op, kOpRw);
  EXPECT_EQ(data->len, 4U);
}

TEST_F(VsockMuxerTest, AResetOwedForAnEarlierPacketDoesNotRefuseANewStreamOnTheSamePorts) {
  // A late CREDIT_UPDATE of a stream that is gone: the muxer owes the guest a RST for it.
  guest_sends(kOpCreditUpdate);
  // Before that RST went out, the guest opens a new stream on the same ports. The RST
  // would reach it first and the guest would take it as the refusal of the new stream.
  guest_connects();
  const auto first = fill(4096);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->op, kOpResponse);
  EXPECT_EQ(first->src_port, 1U);
  EXPECT_EQ(first->dst_port, 1024U);
  EXPECT_FALSE(fill(4096).has_value());  // and no RST after it either
}

}  // namespace
}  // namespace dsec::virtio::vsock

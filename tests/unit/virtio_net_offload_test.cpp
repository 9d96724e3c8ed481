// virtio-net on an fd that carries a virtio_net_hdr before each frame (a TAP opened with
// IFF_VNET_HDR): the offload features it offers, the TAP offloads that follow from what
// the guest took, and the header passing through both ways (zeroed towards a guest that
// took no offload).
#include <gtest/gtest.h>
#include <linux/if_tun.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "tests/unit/virtio_net_fixture.h"
#include "vmm/devices/virtio/net/net.h"

namespace dsec::virtio {
namespace {

constexpr uint64_t kOffloadFeatures =
    feature_bit(kNetFeatureCsum) | feature_bit(kNetFeatureGuestCsum) |
    feature_bit(kNetFeatureGuestTso4) | feature_bit(kNetFeatureGuestTso6) |
    feature_bit(kNetFeatureHostTso4) | feature_bit(kNetFeatureHostTso6);

// A TCPv4 segment's header as a guest or the host's stack writes it: checksum needed
// (flags 1), GSO TCPv4 (1), hdr_len 54, gso_size 1448, csum_start 34, csum_offset 16;
// num_buffers is the last two bytes.
std::vector<uint8_t> tso_header() {
  return {1, 1, 54, 0, 0xa8, 0x05, 34, 0, 16, 0, 0, 0};
}

class VirtioNetOffloadTest : public VirtioNetTest {
 protected:
  VirtioNetOffloadTest() {
    format_ = {.vnet_header = true, .set_offloads = [this](unsigned flags) {
                 offloads_set_.push_back(flags);
                 return ok();
               }};
  }
  std::vector<unsigned> offloads_set_;
};

// A guest driver that takes none of the offloads.
class VirtioNetPlainGuestTest : public VirtioNetOffloadTest {
 protected:
  uint64_t driver_features() override { return net_->features() & ~kOffloadFeatures; }
};

TEST(VirtioNetOffloadRules, TheTapsOffloadsFollowTheGuestsFeatures) {
  EXPECT_EQ(tap_offloads_for(kOffloadFeatures), unsigned{TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6});
  EXPECT_EQ(tap_offloads_for(feature_bit(kNetFeatureGuestCsum)), unsigned{TUN_F_CSUM});
  EXPECT_EQ(tap_offloads_for(feature_bit(kNetFeatureGuestCsum) | feature_bit(kNetFeatureGuestTso4)),
            unsigned{TUN_F_CSUM | TUN_F_TSO4});
  // Segmentation without checksum offload is not a combination a driver may take.
  EXPECT_EQ(tap_offloads_for(feature_bit(kNetFeatureGuestTso4)), 0U);
  EXPECT_EQ(tap_offloads_for(feature_bit(kNetFeatureHostTso4) | feature_bit(kNetFeatureCsum)), 0U);
}

TEST_F(VirtioNetTest, AnFdWithoutTheHeaderOffersNoOffload) {
  EXPECT_EQ(net_->features() & kOffloadFeatures, 0U);
}

TEST_F(VirtioNetOffloadTest, OffersTheOffloadsAndSetsTheTapsOnceActivated) {
  EXPECT_EQ(net_->features() & kOffloadFeatures, kOffloadFeatures);
  EXPECT_EQ(offloads_set_, (std::vector<unsigned>{TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6}));
}

TEST_F(VirtioNetOffloadTest, ATxFramesHeaderGoesToTheTapAsTheGuestWroteIt) {
  const auto header = tso_header();
  const auto frame = frame_of(3000, 5);
  ASSERT_OK(memory_.write(kBuf, header));
  ASSERT_OK(memory_.write(kBuf + 0x100, frame));
  tx_.set_desc(0, kBuf, VirtioNet::kHeaderSize, kNext, 1);
  tx_.set_desc(1, kBuf + 0x100, static_cast<uint32_t>(frame.size()), 0);
  tx_.publish(0);
  net_->notify(VirtioNet::kTxQueue);
  pump();
  std::vector<uint8_t> got(70000);
  const ssize_t n = ::recv(peer_.get(), got.data(), got.size(), 0);
  ASSERT_EQ(n, static_cast<ssize_t>(header.size() + frame.size()));
  got.resize(static_cast<size_t>(n));
  std::vector<uint8_t> want = header;
  want.insert(want.end(), frame.begin(), frame.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(tx_.used_elem(0), (UsedElem{0, 0}));
  EXPECT_EQ(net_->metrics()->tx_bytes_count.total(), frame.size());
}

TEST_F(VirtioNetOffloadTest, AnRxFrameKeepsTheTapsHeaderWithOneBuffer) {
  rx_.set_desc(0, kBuf, 0x8000, kWrite);
  rx_.publish(0);
  net_->notify(VirtioNet::kRxQueue);
  pump();
  std::vector<uint8_t> sent = tso_header();
  const auto frame = frame_of(20000, 9);  // a large segment, whole
  sent.insert(sent.end(), frame.begin(), frame.end());
  send_from_host(sent);
  pump();
  ASSERT_EQ(rx_.used_idx(), 1);
  EXPECT_EQ(rx_.used_elem(0), (UsedElem{0, 12 + 20000}));
  std::vector<uint8_t> header = tso_header();
  header[10] = 1;  // num_buffers
  EXPECT_EQ(bytes_at(kBuf, 12), header);
  EXPECT_EQ(bytes_at(kBuf + 12, frame.size()), frame);
}

TEST_F(VirtioNetOffloadTest, AReadShorterThanTheHeaderIsDroppedAndTheNextFrameLands) {
  rx_.set_desc(0, kBuf, 2048, kWrite);
  rx_.publish(0);
  net_->notify(VirtioNet::kRxQueue);
  pump();
  send_from_host({1, 2, 3, 4, 5});
  std::vector<uint8_t> next(12, 0);
  const auto frame = frame_of(64, 1);
  next.insert(next.end(), frame.begin(), frame.end());
  send_from_host(next);
  pump();
  ASSERT_EQ(rx_.used_idx(), 1);
  EXPECT_EQ(rx_.used_elem(0), (UsedElem{0, 12 + 64}));
  EXPECT_EQ(bytes_at(kBuf + 12, 64), frame);
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioNetPlainGuestTest, AGuestWithoutOffloadsGetsAZeroHeaderAndTheTapNone) {
  EXPECT_EQ(offloads_set_, (std::vector<unsigned>{0}));
  rx_.set_desc(0, kBuf, 0x8000, kWrite);
  rx_.publish(0);
  net_->notify(VirtioNet::kRxQueue);
  pump();
  std::vector<uint8_t> sent = tso_header();
  const auto frame = frame_of(100, 4);
  sent.insert(sent.end(), frame.begin(), frame.end());
  send_from_host(sent);
  pump();
  ASSERT_EQ(rx_.used_idx(), 1);
  std::vector<uint8_t> header(12, 0);
  header[10] = 1;
  EXPECT_EQ(bytes_at(kBuf, 12), header);
  EXPECT_EQ(bytes_at(kBuf + 12, frame.size()), frame);
}

}  // namespace
}  // namespace dsec::virtio

// virtio-mmio as a guest driver sees it: identification, feature negotiation, queue setup,
// activation, notifications, interrupts, reset, and accesses a well-behaved driver would
// not make. Register offsets are the spec's (virtio 1.2, 4.2.2), written out here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/support/fake_virtio_device.h"
#include "tests/support/result_matchers.h"
#include "tests/support/virtq_driver.h"
#include "vmm/devices/virtio/mmio_cmdline.h"
#include "vmm/devices/virtio/mmio_transport.h"

namespace dsec::virtio {
namespace {

using testing::DriverQueue;
using ::testing::ElementsAre;
using testing::FakeVirtioDevice;
using ::testing::HasSubstr;
using testing::kWrite;
using testing::QueueLayout;

// Register offsets and values from the spec.
constexpr uint64_t kMagic = 0x000, kVersion = 0x004, kDeviceId = 0x008, kVendorId = 0x00c;
constexpr uint64_t kDeviceFeatures = 0x010, kDeviceFeaturesSel = 0x014;
constexpr uint64_t kDriverFeatures = 0x020, kDriverFeaturesSel = 0x024;
constexpr uint64_t kQueueSel = 0x030, kQueueNumMax = 0x034, kQueueNum = 0x038;
constexpr uint64_t kQueueReady = 0x044, kQueueNotify = 0x050;
constexpr uint64_t kInterruptStatus = 0x060, kInterruptAck = 0x064, kStatus = 0x070;
constexpr uint64_t kQueueDescLow = 0x080, kQueueDescHigh = 0x084;
constexpr uint64_t kQueueDriverLow = 0x090, kQueueDriverHigh = 0x094;
constexpr uint64_t kQueueDeviceLow = 0x0a0, kQueueDeviceHigh = 0x0a4;
constexpr uint64_t kShmLenLow = 0x0b0, kConfigGeneration = 0x0fc, kConfig = 0x100;

constexpr uint32_t kAcknowledge = 1, kDriver = 2, kDriverOk = 4, kFeaturesOk = 8;
constexpr uint32_t kNeedsReset = 0x40, kFailed = 0x80;
constexpr uint32_t kUpToFeatures = kAcknowledge | kDriver;
constexpr uint32_t kUpToQueues = kUpToFeatures | kFeaturesOk;
constexpr uint32_t kLive = kUpToQueues | kDriverOk;

constexpr uint64_t kVersion1 = uint64_t{1} << 32;
constexpr uint64_t kIndirectDesc = uint64_t{1} << 28;
constexpr uint64_t kEventIdx = uint64_t{1} << 29;
constexpr uint64_t kDeviceSpecific = uint64_t{1} << 3;
constexpr uint64_t kOffered = kDeviceSpecific | kIndirectDesc | kEventIdx;  // + VERSION_1

constexpr uint64_t kMiB = 1 << 20;

class MmioTransportTest : public ::testing::Test {
 protected:
  void SetUp() override { create_transport(); }

  void create_transport() {
    auto device = std::make_unique<FakeVirtioDevice>(kOffered, std::vector<uint16_t>{8, 16},
                                                     std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
    device_ = device.get();
    auto transport = MmioTransport::create(memory_, std::move(device),
                                           [this](bool raised) { line_.push_back(raised); });
    ASSERT_OK(transport);
    transport_ = std::move(*transport);
  }

  uint32_t rd(uint64_t offset) {
    std::array<uint8_t, 4> bytes{0xee, 0xee, 0xee, 0xee};
    transport_->read(offset, bytes);
    uint32_t value = 0;
    std::memcpy(&value, bytes.data(), 4);
    return value;
  }
  void wr(uint64_t offset, uint32_t value) {
    std::array<uint8_t, 4> bytes{};
    std::memcpy(bytes.data(), &value, 4);
    transport_->write(offset, bytes);
  }

  void negotiate(uint64_t features) {
    wr(kStatus, kAcknowledge);
    wr(kStatus, kUpToFeatures);
    wr(kDriverFeaturesSel, 0);
    wr(kDriverFeatures, static_cast<uint32_t>(features));
    wr(kDriverFeaturesSel, 1);
    wr(kDriverFeatures, static_cast<uint32_t>(features >> 32));
    wr(kStatus, kUpToQueues);
  }
  void setup_queue(uint32_t index, const QueueLayout& layout) {
    wr(kQueueSel, index);
    wr(kQueueNum, layout.size);
    wr(kQueueDescLow, static_cast<uint32_t>(layout.desc));
    wr(kQueueDescHigh, static_cast<uint32_t>(layout.desc >> 32));
    wr(kQueueDriverLow, static_cast<uint32_t>(layout.avail));
    wr(kQueueDriverHigh, static_cast<uint32_t>(layout.avail >> 32));
    wr(kQueueDeviceLow, static_cast<uint32_t>(layout.used));
    wr(kQueueDeviceHigh, static_cast<uint32_t>(layout.used >> 32));
    wr(kQueueReady, 1);
  }
  // What Linux's virtio_mmio does on probe: negotiate, set queue 0 up, DRIVER_OK.
  void bring_up(uint64_t features = kVersion1) {
    negotiate(features);
    ASSERT_EQ(rd(kStatus), kUpToQueues);
    setup_queue(0, queue0_);
    wr(kStatus, kLive);
  }

  GuestMemory memory_ = [] {
    const std::array<GuestRange, 1> ranges{{{0, 1 * kMiB}}};
    return std::move(GuestMemory::anonymous(ranges).value());
  }();
  QueueLayout queue0_{.size = 8, .desc = 0x1000, .avail = 0x2000, .used = 0x3000};
  std::vector<bool> line_;
  FakeVirtioDevice* device_ = nullptr;
  std::unique_ptr<MmioTransport> transport_;
};

TEST_F(MmioTransportTest, IdentifiesAsAVersion2VirtioMmioDevice) {
  EXPECT_EQ(rd(kMagic), 0x74726976u);  // "virt"
  EXPECT_EQ(rd(kVersion), 2u);
  EXPECT_EQ(rd(kDeviceId), FakeVirtioDevice::kDeviceType);
  EXPECT_EQ(rd(kVendorId), 0x43455344u);
  EXPECT_EQ(rd(kStatus), 0u);
  EXPECT_EQ(rd(kShmLenLow), 0xffffffffu);  // no shared memory regions
}

TEST_F(MmioTransportTest, OffersTheDevicesFeaturesAndVersion1ByPage) {
  wr(kDeviceFeaturesSel, 0);
  EXPECT_EQ(rd(kDeviceFeatures), static_cast<uint32_t>(kOffered));
  wr(kDeviceFeaturesSel, 1);
  EXPECT_EQ(rd(kDeviceFeatures), 1u);  // bit 32: VIRTIO_F_VERSION_1
  wr(kDeviceFeaturesSel, 2);
  EXPECT_EQ(rd(kDeviceFeatures), 0u);
  EXPECT_EQ(transport_->device_features(), kOffered | kVersion1);
}

TEST_F(MmioTransportTest, AcceptsASubsetOfTheOfferedFeatures) {
  negotiate(kVersion1 | kEventIdx);
  EXPECT_EQ(rd(kStatus), kUpToQueues);
  EXPECT_EQ(transport_->state().driver_features, kVersion1 | kEventIdx);
}

TEST_F(MmioTransportTest, RefusesFeaturesOkForAFeatureTheDeviceDidNotOffer) {
  negotiate(kVersion1 | (uint64_t{1} << 5));
  EXPECT_EQ(rd(kStatus), kUpToFeatures);  // FEATURES_OK did not stick
  // Nor can the driver go on to DRIVER_OK.
  wr(kStatus, kUpToFeatures | kDriverOk);
  EXPECT_EQ(rd(kStatus), kUpToFeatures);
  EXPECT_EQ(device_->activations, 0);
}

TEST_F(MmioTransportTest, RefusesFeaturesOkWithoutVersion1) {
  negotiate(kEventIdx);
  EXPECT_EQ(rd(kStatus), kUpToFeatures);
}

TEST_F(MmioTransportTest, TakesDriverFeaturesOnlyBetweenDriverAndFeaturesOk) {
  wr(kStatus, kAcknowledge);
  wr(kDriverFeaturesSel, 1);
  wr(kDriverFeatures, 1);  // before DRIVER: dropped
  EXPECT_EQ(transport_->state().driver_features, 0u);
  negotiate(kVersion1);
  wr(kDriverFeaturesSel, 0);
  wr(kDriverFeatures, static_cast<uint32_t>(kEventIdx));  // after FEATURES_OK: dropped
  EXPECT_EQ(transport_->state().driver_features, kVersion1);
  wr(kDriverFeaturesSel, 7);
  EXPECT_EQ(transport_->state().driver_features, kVersion1);
}

TEST_F(MmioTransportTest, StatusBitsAreSetInOrderAndNeverCleared) {
  wr(kStatus, kDriver);  // DRIVER without ACKNOWLEDGE
  EXPECT_EQ(rd(kStatus), 0u);
  wr(kStatus, kAcknowledge);
  wr(kStatus, kAcknowledge | kFeaturesOk);  // skips DRIVER
  EXPECT_EQ(rd(kStatus), kAcknowledge);
  wr(kStatus, kUpToFeatures);
  wr(kStatus, kDriver);  // clears ACKNOWLEDGE
  EXPECT_EQ(rd(kStatus), kUpToFeatures);
  wr(kStatus, kUpToFeatures | 0x10);  // a reserved bit
  EXPECT_EQ(rd(kStatus), kUpToFeatures);
  wr(kStatus, kUpToFeatures | kNeedsReset);  // the device's bit: not the driver's to set
  EXPECT_EQ(rd(kStatus), kUpToFeatures);
}

TEST_F(MmioTransportTest, AfterFailedOnlyAResetIsTaken) {
  wr(kStatus, kAcknowledge);
  wr(kStatus, kAcknowledge | kFailed);
  EXPECT_EQ(rd(kStatus), kAcknowledge | kFailed);
  wr(kStatus, kAcknowledge | kFailed | kDriver);
  EXPECT_EQ(rd(kStatus), kAcknowledge | kFailed);
  wr(kStatus, 0);
  EXPECT_EQ(rd(kStatus), 0u);
}

TEST_F(MmioTransportTest, ReportsEachQueuesMaximumSizeAndZeroForQueuesThatDoNotExist) {
  wr(kQueueSel, 0);
  EXPECT_EQ(rd(kQueueNumMax), 8u);
  wr(kQueueSel, 1);
  EXPECT_EQ(rd(kQueueNumMax), 16u);
  wr(kQueueSel, 2);
  EXPECT_EQ(rd(kQueueNumMax), 0u);
  EXPECT_EQ(rd(kQueueReady), 0u);
  wr(kQueueSel, 0xffffffff);
  EXPECT_EQ(rd(kQueueNumMax), 0u);
}

TEST_F(MmioTransportTest, QueueSetupTakesEffectOnlyAfterFeaturesOk) {
  setup_queue(0, queue0_);  // before FEATURES_OK: all dropped
  EXPECT_EQ(rd(kQueueReady), 0u);
  EXPECT_EQ(transport_->state().queues[0].desc_table, 0u);

  negotiate(kVersion1);
  const QueueLayout high{
      .size = 4, .desc = 0x1'2345'6780, .avail = 0x2'0000'0002, .used = 0x3'0000'0004};
  setup_queue(1, high);
  wr(kQueueSel, 1);
  EXPECT_EQ(rd(kQueueReady), 1u);
  const QueueState q = transport_->state().queues[1];
  EXPECT_EQ(q.size, 4);
  EXPECT_TRUE(q.ready);
  EXPECT_EQ(q.desc_table, 0x1'2345'6780u);
  EXPECT_EQ(q.avail_ring, 0x2'0000'0002u);
  EXPECT_EQ(q.used_ring, 0x3'0000'0004u);
  // A selector past the last queue reaches nothing.
  wr(kQueueSel, 5);
  wr(kQueueNum, 2);
  EXPECT_EQ(transport_->state().queues[0].size, 8);  // still the reset default
}

TEST_F(MmioTransportTest, AQueueSizeThatDoesNotFit16BitsIsNotTruncatedIntoAValidOne) {
  negotiate(kVersion1);
  setup_queue(0, queue0_);
  wr(kQueueNum, 0x10004);  // would be 4 if truncated
  EXPECT_EQ(transport_->state().queues[0].size, 0);
  wr(kStatus, kLive);
  EXPECT_EQ(rd(kStatus), kLive | kNeedsReset);
  EXPECT_EQ(device_->activations, 0);
}

TEST_F(MmioTransportTest, DriverOkActivatesTheDeviceWithItsQueuesAndFeatures) {
  bring_up(kVersion1 | kEventIdx | kIndirectDesc);
  EXPECT_EQ(rd(kStatus), kLive);
  EXPECT_TRUE(transport_->active());
  EXPECT_EQ(device_->activations, 1);
  EXPECT_EQ(device_->activated_features, kVersion1 | kEventIdx | kIndirectDesc);
  ASSERT_EQ(device_->queues.size(), 2u);
  EXPECT_TRUE(device_->queues[0].state().ready);
  EXPECT_TRUE(device_->queues[0].state().event_idx);
  EXPECT_TRUE(device_->queues[0].state().indirect_desc);
  EXPECT_FALSE(device_->queues[1].state().ready);  // the driver did not set it up
  EXPECT_EQ(device_->interrupt, transport_->interrupt());
}

TEST_F(MmioTransportTest, DescribeListsStatusQueuesAndTheDevicesOwnLinesIndented) {
  device_->state_text = "first line\nsecond line";
  EXPECT_EQ(transport_->describe(),
            "virtio-unknown (type 42): status 0x0 (inactive), interrupt status 0x0\n"
            "  queue 0: not ready\n"
            "  queue 1: not ready");  // an inactive device has nothing to add
  bring_up();
  transport_->interrupt()->signal_used_buffer();
  EXPECT_EQ(transport_->describe(),
            "virtio-unknown (type 42): status 0xf (active), interrupt status 0x1\n"
            "  queue 0: size 8, device next avail 0 next used 0; driver avail idx 0, used idx 0; "
            "avail flags 0\n"
            "  queue 1: not ready\n"
            "  first line\n"
            "  second line");
}

TEST_F(MmioTransportTest, QueueSetupIsIgnoredOnceLive) {
  bring_up();
  wr(kQueueSel, 0);
  wr(kQueueNum, 2);
  wr(kQueueDescLow, 0x9000);
  wr(kQueueReady, 0);
  const QueueState q = transport_->state().queues[0];
  EXPECT_EQ(q.size, 8);
  EXPECT_EQ(q.desc_table, 0x1000u);
  EXPECT_TRUE(q.ready);
}

TEST_F(MmioTransportTest, ARingOutsideGuestMemoryNeedsAResetInsteadOfActivating) {
  queue0_.used = 2 * kMiB;
  bring_up();
  EXPECT_EQ(rd(kStatus), kLive | kNeedsReset);
  EXPECT_FALSE(transport_->active());
  EXPECT_EQ(device_->activations, 0);
  EXPECT_EQ(rd(kInterruptStatus), 2u);  // configuration change: go look at the status
  EXPECT_THAT(line_, ElementsAre(true));
  // A reset recovers.
  wr(kStatus, 0);
  EXPECT_EQ(rd(kStatus), 0u);
  queue0_.used = 0x3000;
  bring_up();
  EXPECT_EQ(rd(kStatus), kLive);
  EXPECT_EQ(device_->activations, 1);
}

TEST_F(MmioTransportTest, ADeviceThatFailsToActivateNeedsAReset) {
  device_->fail_activation = true;
  bring_up();
  EXPECT_EQ(rd(kStatus), kLive | kNeedsReset);
  EXPECT_FALSE(transport_->active());
  EXPECT_EQ(device_->resets, 1);
}

TEST_F(MmioTransportTest, QueueNotifyReachesAnActiveDeviceForReadyQueuesOnly) {
  wr(kQueueNotify, 0);  // not live yet
  bring_up();
  wr(kQueueNotify, 0);
  wr(kQueueNotify, 1);  // not set up by the driver
  wr(kQueueNotify, 2);  // no such queue
  wr(kQueueNotify, 0x10000);
  EXPECT_THAT(device_->notified, ElementsAre(0));
}

TEST_F(MmioTransportTest, UsedBuffersRaiseTheInterruptUntilTheDriverAcknowledges) {
  device_->serve_queues_in = &memory_;
  bring_up();
  DriverQueue driver(memory_, queue0_);
  driver.set_desc(0, 0x10000, 64, kWrite);
  driver.publish(0);
  wr(kQueueNotify, 0);
  EXPECT_EQ(driver.used_idx(), 1);
  EXPECT_EQ(driver.used_elem(0), (DriverQueue::UsedElem{0, 64}));
  EXPECT_EQ(rd(kInterruptStatus), 1u);
  EXPECT_THAT(line_, ElementsAre(true));
  wr(kInterruptAck, 1);
  EXPECT_EQ(rd(kInterruptStatus), 0u);
  EXPECT_THAT(line_, ElementsAre(true, false));
}

TEST_F(MmioTransportTest, AMalformedChainShowsAsDeviceNeedsReset) {
  device_->serve_queues_in = &memory_;
  bring_up();
  DriverQueue driver(memory_, queue0_);
  driver.set_desc(0, 0x10000, 64, kWrite | 1 /*NEXT*/, 0);  // loops on itself
  driver.publish(0);
  wr(kQueueNotify, 0);
  EXPECT_EQ(driver.used_idx(), 0);
  EXPECT_EQ(rd(kStatus), kLive | kNeedsReset);
  EXPECT_EQ(rd(kInterruptStatus), 2u);
}

TEST_F(MmioTransportTest, ConfigChangesRaiseTheInterruptAndMoveTheGeneration) {
  bring_up();
  const uint32_t generation = rd(kConfigGeneration);
  transport_->interrupt()->signal_config_change();
  EXPECT_EQ(rd(kConfigGeneration), generation + 1);
  EXPECT_EQ(rd(kInterruptStatus), 2u);
  transport_->interrupt()->signal_used_buffer();
  EXPECT_EQ(rd(kInterruptStatus), 3u);
  wr(kInterruptAck, 2);
  EXPECT_EQ(rd(kInterruptStatus), 1u);
  EXPECT_THAT(line_, ElementsAre(true, true));  // no lowering while a bit is left
}

TEST_F(MmioTransportTest, ResetReturnsEverythingToItsInitialState) {
  bring_up(kVersion1 | kEventIdx);
  transport_->interrupt()->signal_config_change();
  const TransportState initial_with_generation = [&] {
    TransportState s;
    s.config_generation = 1;
    for (const uint16_t max : {8, 16}) {
      QueueState q;
      q.size = max;
      s.queues.push_back(q);
    }
    return s;
  }();
  wr(kStatus, 0);
  EXPECT_EQ(device_->resets, 1);
  EXPECT_FALSE(transport_->active());
  EXPECT_EQ(transport_->state(), initial_with_generation);
  EXPECT_THAT(line_, ElementsAre(true, false));
  // And the driver can start over.
  bring_up();
  EXPECT_EQ(device_->activations, 2);
}

TEST_F(MmioTransportTest, RegisterAccessesOfTheWrongWidthReadZeroAndWriteNothing) {
  for (const size_t width : {1u, 2u, 3u, 8u}) {
    std::vector<uint8_t> bytes(width, 0xee);
    transport_->read(kMagic, bytes);
    EXPECT_THAT(bytes, ::testing::Each(0)) << width;
  }
  std::array<uint8_t, 4> unaligned{0xee, 0xee, 0xee, 0xee};
  transport_->read(kMagic + 2, unaligned);
  EXPECT_THAT(unaligned, ::testing::Each(0));

  const std::array<uint8_t, 1> one{kAcknowledge};
  transport_->write(kStatus, one);
  const std::array<uint8_t, 8> eight{kAcknowledge, 0, 0, 0, 0, 0, 0, 0};
  transport_->write(kStatus, eight);
  const std::array<uint8_t, 4> four{kAcknowledge, 0, 0, 0};
  transport_->write(kStatus + 1, four);
  EXPECT_EQ(rd(kStatus), 0u);
  transport_->write(kStatus, std::span<const uint8_t>{});
  transport_->read(kStatus, std::span<uint8_t>{});
  EXPECT_EQ(rd(kStatus), 0u);
}

TEST_F(MmioTransportTest, ConfigSpaceTakesAnyWidthAndReadsZeroPastItsEnd) {
  std::array<uint8_t, 1> byte{};
  transport_->read(kConfig + 2, byte);
  EXPECT_EQ(byte[0], 3);
  std::array<uint8_t, 2> word{};
  transport_->read(kConfig + 4, word);
  EXPECT_THAT(word, ElementsAre(5, 6));
  EXPECT_EQ(rd(kConfig + 4), 0x0605u);  // straddles the end of the 6-byte space
  EXPECT_EQ(rd(kConfig + 0x100), 0u);
  std::array<uint8_t, 8> qword{};
  transport_->read(kConfig + 0xef8, qword);  // the window's last 8 bytes
  EXPECT_THAT(qword, ::testing::Each(0));

  const std::array<uint8_t, 3> written{0xa, 0xb, 0xc};
  transport_->write(kConfig + 4, written);  // the third byte is past the end: dropped
  EXPECT_THAT(device_->config(), ElementsAre(1, 2, 3, 4, 0xa, 0xb));
}

TEST_F(MmioTransportTest, SavedStateRestoresALiveDeviceInAFreshTransport) {
  bring_up(kVersion1 | kEventIdx);
  DriverQueue driver(memory_, queue0_);
  driver.set_desc(2, 0x10000, 64, kWrite);
  driver.publish(2);
  ASSERT_OK_AND_ASSIGN(auto chain, device_->queues[0].pop(memory_));
  ASSERT_TRUE(chain.has_value());
  transport_->interrupt()->signal_used_buffer();
  const TransportState saved = transport_->state();
  EXPECT_EQ(saved.status, kLive);
  EXPECT_EQ(saved.interrupt_status, 1u);
  EXPECT_EQ(saved.queues[0].next_avail, 1);

  create_transport();
  ASSERT_OK(transport_->restore(saved));
  EXPECT_TRUE(transport_->active());
  EXPECT_EQ(device_->activations, 1);
  EXPECT_EQ(transport_->state(), saved);
  EXPECT_EQ(rd(kStatus), kLive);
  EXPECT_EQ(rd(kInterruptStatus), 1u);
  // The device takes up where the saved one stopped.
  ASSERT_OK(device_->queues[0].add_used(memory_, 2, 64));
  EXPECT_EQ(driver.used_idx(), 1);
}

TEST_F(MmioTransportTest, RestoreRefusesStateOfAnotherShape) {
  TransportState saved = transport_->state();
  saved.queues.pop_back();
  auto status = transport_->restore(saved);
  ASSERT_FALSE(status.has_value());
  EXPECT_THAT(status.error().message(), HasSubstr("1 queues, the device 2"));

  saved = transport_->state();
  saved.queues[0].size = 16;  // queue 0's maximum is 8
  status = transport_->restore(saved);
  ASSERT_FALSE(status.has_value());
  EXPECT_THAT(status.error().message(), HasSubstr("above the device's maximum 8"));
}

TEST(MmioTransportCreate, RefusesADeviceWithBadQueueSizesOrNone) {
  std::array<GuestRange, 1> ranges{{{0, kMiB}}};
  auto memory = std::move(GuestMemory::anonymous(ranges).value());
  auto bad = MmioTransport::create(
      memory,
      std::make_unique<FakeVirtioDevice>(0, std::vector<uint16_t>{8, 12}, std::vector<uint8_t>{}),
      {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().message(), HasSubstr("queue 1"));
  auto none = MmioTransport::create(
      memory,
      std::make_unique<FakeVirtioDevice>(0, std::vector<uint16_t>{}, std::vector<uint8_t>{}), {});
  ASSERT_FALSE(none.has_value());
  EXPECT_THAT(none.error().message(), HasSubstr("no queues"));
}

TEST(VirtioMmioCmdline, DeclaresASlotTheWayLinuxParsesIt) {
  EXPECT_EQ(virtio_mmio_cmdline_arg(0xc0000000, 5), "virtio_mmio.device=4K@0xc0000000:5");
  EXPECT_EQ(virtio_mmio_cmdline_arg(0xc0001000, 23, 0x200), "virtio_mmio.device=512@0xc0001000:23");
}

}  // namespace
}  // namespace dsec::virtio

// virtio-rng as a guest driver sees it: the bytes that arrive in its buffers, the used
// lengths it gets back, its interrupts, and what a malformed chain does (a queue that needs
// a reset, never a crash). The driver side writes the rings as the spec lays them out
// (tests/support/virtq_driver.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/virtq_driver.h"
#include "vmm/devices/virtio/mmio_transport.h"
#include "vmm/devices/virtio/rng.h"

namespace dsec::virtio {
namespace {

using testing::DriverQueue;
using testing::kNext;
using testing::kWrite;
using testing::QueueLayout;
using UsedElem = DriverQueue::UsedElem;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBuf = 0x10000;  // where test buffers go; rings are below
constexpr uint16_t kAvailFlagNoInterrupt = 1;

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, 1 * kMiB}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

bool all_equal_to(std::span<const uint8_t> bytes, uint8_t value) {
  return std::all_of(bytes.begin(), bytes.end(), [value](uint8_t b) { return b == value; });
}

// The device activated on one queue, as the transport would do it.
class VirtioRngTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(memory_.fill(0, 1 * kMiB, 0));
    queues_.push_back(VirtQueue::create(VirtioRng::kQueueSize).value());
    queues_[0].state() = driver_.queue_state(/*event_idx=*/false, /*indirect=*/true);
    ASSERT_OK(queues_[0].validate(memory_));
    ASSERT_OK(rng_.activate(queues_, rng_.features(), interrupt_));
  }

  std::vector<uint8_t> bytes_at(uint64_t gpa, uint64_t len) {
    std::vector<uint8_t> out(len);
    EXPECT_TRUE(memory_.read(gpa, out).has_value());
    return out;
  }

  GuestMemory memory_ = make_memory();
  DriverQueue driver_{memory_, QueueLayout{}};
  std::vector<VirtQueue> queues_;
  int raised_ = 0;
  std::shared_ptr<VirtioInterrupt> interrupt_ =
      std::make_shared<VirtioInterrupt>([this](bool raised) { raised_ += raised ? 1 : 0; });
  io::EventLoop loop_ = std::move(io::EventLoop::create(16).value());
  VirtioRng rng_{memory_, loop_};
};

TEST_F(VirtioRngTest, IsAnEntropyDeviceWithOneQueueAndNoConfigurationSpace) {
  EXPECT_EQ(rng_.device_type(), 4u);
  EXPECT_THAT(rng_.queue_max_sizes(), ::testing::ElementsAre(VirtioRng::kQueueSize));
  std::array<uint8_t, 4> config{};
  rng_.read_config(0, config);
  EXPECT_TRUE(all_equal_to(config, 0));
}

TEST_F(VirtioRngTest, FillsEachRequestWithFreshRandomBytes) {
  driver_.set_desc(0, kBuf, 64, kWrite);
  driver_.set_desc(1, kBuf + 0x1000, 64, kWrite);
  driver_.publish(0);
  driver_.publish(1);
  rng_.notify(0);

  ASSERT_EQ(driver_.used_idx(), 2);
  EXPECT_EQ(driver_.used_elem(0), (UsedElem{0, 64}));
  EXPECT_EQ(driver_.used_elem(1), (UsedElem{1, 64}));
  const auto first = bytes_at(kBuf, 64);
  const auto second = bytes_at(kBuf + 0x1000, 64);
  // 64 zero bytes from a CSPRNG, or two equal draws, have probability 2^-512.
  EXPECT_FALSE(all_equal_to(first, 0));
  EXPECT_NE(first, second);
  EXPECT_GE(raised_, 1);
  EXPECT_EQ(interrupt_->status() & kInterruptUsedBuffer, kInterruptUsedBuffer);
  EXPECT_FALSE(interrupt_->needs_reset());

  // Once more on the same buffer: new bytes again.
  driver_.publish(0);
  rng_.notify(0);
  ASSERT_EQ(driver_.used_idx(), 3);
  EXPECT_NE(bytes_at(kBuf, 64), first);
}

TEST_F(VirtioRngTest, FillsEveryWritableBufferAndLeavesReadableOnesAlone) {
  ASSERT_OK(memory_.fill(kBuf, 16, 0xab));
  driver_.set_desc(0, kBuf, 16, kNext, 1);                   // device-readable
  driver_.set_desc(1, kBuf + 0x100, 32, kWrite | kNext, 2);  // device-writable
  driver_.set_desc(2, kBuf + 0x200, 100, kWrite);
  driver_.publish(0);
  rng_.notify(0);

  ASSERT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(driver_.used_elem(0), (UsedElem{0, 132}));
  EXPECT_TRUE(all_equal_to(bytes_at(kBuf, 16), 0xab));
  EXPECT_FALSE(all_equal_to(bytes_at(kBuf + 0x100, 32), 0));
  EXPECT_FALSE(all_equal_to(bytes_at(kBuf + 0x200, 100), 0));
}

TEST_F(VirtioRngTest, AChainWithOnlyReadableBuffersGetsNoBytesAndLengthZero) {
  ASSERT_OK(memory_.fill(kBuf, 64, 0xab));
  driver_.set_desc(0, kBuf, 64, 0);
  driver_.publish(0);
  rng_.notify(0);

  ASSERT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(driver_.used_elem(0), (UsedElem{0, 0}));
  EXPECT_TRUE(all_equal_to(bytes_at(kBuf, 64), 0xab));
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioRngTest, ARequestGetsAtMost64KiB) {
  constexpr uint32_t kAsked = 128 * 1024;
  driver_.set_desc(0, kBuf, kAsked, kWrite);
  driver_.publish(0);
  rng_.notify(0);

  ASSERT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(driver_.used_elem(0), (UsedElem{0, VirtioRng::kMaxBytesPerRequest}));
  EXPECT_FALSE(all_equal_to(bytes_at(kBuf + VirtioRng::kMaxBytesPerRequest - 64, 64), 0));
  // Past the limit the buffer is as the driver left it.
  EXPECT_TRUE(all_equal_to(
      bytes_at(kBuf + VirtioRng::kMaxBytesPerRequest, kAsked - VirtioRng::kMaxBytesPerRequest), 0));
}

TEST_F(VirtioRngTest, NoInterruptWhenTheDriverSuppressesIt) {
  driver_.set_avail_flags(kAvailFlagNoInterrupt);
  driver_.set_desc(0, kBuf, 64, kWrite);
  driver_.publish(0);
  rng_.notify(0);
  EXPECT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(raised_, 0);
}

TEST_F(VirtioRngTest, AMalformedChainBreaksTheQueueAndAsksForAReset) {
  driver_.set_desc(0, 2 * kMiB, 64, kWrite);  // outside guest memory
  driver_.publish(0);
  rng_.notify(0);

  EXPECT_TRUE(queues_[0].state().broken);
  EXPECT_TRUE(interrupt_->needs_reset());
  EXPECT_EQ(interrupt_->status() & kInterruptConfigChange, kInterruptConfigChange);
  EXPECT_EQ(driver_.used_idx(), 0);
  const int raised = raised_;
  EXPECT_GE(raised, 1);

  // A well-formed chain after it is refused too, quietly: the queue stays broken until
  // the driver resets the device.
  driver_.set_desc(1, kBuf, 64, kWrite);
  driver_.publish(1);
  rng_.notify(0);
  EXPECT_EQ(driver_.used_idx(), 0);
  EXPECT_TRUE(all_equal_to(bytes_at(kBuf, 64), 0));
  EXPECT_EQ(raised_, raised);
}

TEST_F(VirtioRngTest, AnAvailIndexTooFarAheadBreaksTheQueue) {
  driver_.set_avail_idx(1000);  // more than the queue size ahead
  rng_.notify(0);
  EXPECT_TRUE(interrupt_->needs_reset());
  EXPECT_EQ(driver_.used_idx(), 0);
}

TEST_F(VirtioRngTest, DoesNothingOnceReset) {
  rng_.reset();
  driver_.set_desc(0, kBuf, 64, kWrite);
  driver_.publish(0);
  rng_.notify(0);
  EXPECT_EQ(driver_.used_idx(), 0);
  EXPECT_TRUE(all_equal_to(bytes_at(kBuf, 64), 0));
}

// The whole path a guest takes: the virtio-mmio registers, then a notification either
// through QueueNotify or as an ioeventfd delivers it (MmioTransport::notify).
class VirtioRngOverMmioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(memory_.fill(0, 1 * kMiB, 0));
    auto transport = MmioTransport::create(memory_, std::make_unique<VirtioRng>(memory_, loop_),
                                           [this](bool raised) { raised_ += raised ? 1 : 0; });
    ASSERT_OK(transport);
    transport_ = std::move(*transport);
  }

  uint32_t rd(uint64_t offset) {
    std::array<uint8_t, 4> bytes{};
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
  // What Linux's virtio_mmio and virtio-rng drivers do on probe (VERSION_1 only).
  void bring_up() {
    wr(mmio::kStatus, 1);
    wr(mmio::kStatus, 3);
    wr(mmio::kDriverFeaturesSel, 1);
    wr(mmio::kDriverFeatures, 1);  // VIRTIO_F_VERSION_1
    wr(mmio::kStatus, 11);
    const QueueLayout& l = driver_.layout();
    wr(mmio::kQueueSel, 0);
    wr(mmio::kQueueNum, l.size);
    wr(mmio::kQueueDescLow, static_cast<uint32_t>(l.desc));
    wr(mmio::kQueueDriverLow, static_cast<uint32_t>(l.avail));
    wr(mmio::kQueueDeviceLow, static_cast<uint32_t>(l.used));
    wr(mmio::kQueueReady, 1);
    wr(mmio::kStatus, 15);
  }

  GuestMemory memory_ = make_memory();
  io::EventLoop loop_ = std::move(io::EventLoop::create(16).value());
  DriverQueue driver_{memory_, QueueLayout{}};
  int raised_ = 0;
  std::unique_ptr<MmioTransport> transport_;
};

TEST_F(VirtioRngOverMmioTest, IdentifiesAsAnEntropyDeviceWithOneQueueOf256) {
  EXPECT_EQ(rd(mmio::kMagicValue), mmio::kMagic);
  EXPECT_EQ(rd(mmio::kDeviceId), 4u);
  wr(mmio::kQueueSel, 0);
  EXPECT_EQ(rd(mmio::kQueueNumMax), 256u);
  wr(mmio::kQueueSel, 1);
  EXPECT_EQ(rd(mmio::kQueueNumMax), 0u);
}

TEST_F(VirtioRngOverMmioTest, QueueNotifyDeliversRandomBytesAndAnInterrupt) {
  bring_up();
  ASSERT_TRUE(transport_->active());
  driver_.set_desc(0, kBuf, 32, kWrite);
  driver_.publish(0);
  wr(mmio::kQueueNotify, 0);
  ASSERT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(driver_.used_elem(0), (UsedElem{0, 32}));
  EXPECT_FALSE(all_equal_to(std::span(memory_.span(kBuf, 32).value()), 0));
  EXPECT_EQ(rd(mmio::kInterruptStatus), kInterruptUsedBuffer);
  EXPECT_GE(raised_, 1);
}

TEST_F(VirtioRngOverMmioTest, AnIoeventfdNotificationReachesTheDeviceOnlyWhileItIsActive) {
  driver_.set_desc(0, kBuf, 32, kWrite);
  driver_.publish(0);
  transport_->notify(0);  // before DRIVER_OK: ignored
  EXPECT_EQ(driver_.used_idx(), 0);

  bring_up();
  transport_->notify(7);  // no such queue: ignored
  EXPECT_EQ(driver_.used_idx(), 0);
  transport_->notify(0);
  ASSERT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(driver_.used_elem(0), (UsedElem{0, 32}));

  wr(mmio::kStatus, 0);  // reset
  driver_.publish(0);
  transport_->notify(0);
  EXPECT_EQ(driver_.used_idx(), 1);
}

TEST_F(VirtioRngOverMmioTest, AMalformedChainShowsDeviceNeedsResetInTheStatus) {
  bring_up();
  driver_.set_desc(0, kBuf, 32, kWrite | kNext, 0);  // a loop onto itself
  driver_.publish(0);
  wr(mmio::kQueueNotify, 0);
  EXPECT_EQ(rd(mmio::kStatus) & kStatusDeviceNeedsReset, kStatusDeviceNeedsReset);
  EXPECT_EQ(driver_.used_idx(), 0);
  // The driver's way out: a reset, then the device works again.
  wr(mmio::kStatus, 0);
  EXPECT_EQ(rd(mmio::kStatus), 0u);
}

// Firecracker's entropy rate_limiter: a chain out of tokens stays in the ring, and the
// metrics say what went and what waited. The buckets refill over an hour, so that no
// token comes back while the test runs.
TEST_F(VirtioRngTest, ARateLimiterHoldsBackWhatItsBucketsHaveNoTokensFor) {
  constexpr uint64_t kHour = 3600 * 1000;
  VirtioRng limited(
      memory_, loop_,
      {.bandwidth =
           devices::TokenBucketConfig{.size = 100, .one_time_burst = 0, .refill_time_ms = kHour},
       .ops = devices::TokenBucketConfig{.size = 5, .one_time_burst = 0, .refill_time_ms = kHour}});
  ASSERT_OK(limited.activate(queues_, limited.features(), interrupt_));
  for (uint16_t i = 0; i < 4; ++i) {
    driver_.set_desc(i, kBuf + i * 0x1000, 64, kWrite);
    driver_.publish(i);
  }
  limited.notify(0);
  // 64 of the 100 bytes went; the second 64-byte request waits for tokens.
  ASSERT_EQ(driver_.used_idx(), 1);
  EXPECT_EQ(limited.metrics()->entropy_bytes.total(), 64u);
  EXPECT_EQ(limited.metrics()->entropy_rate_limiter_throttled.total(), 1u);
  limited.notify(0);  // the driver kicks again: still nothing
  EXPECT_EQ(driver_.used_idx(), 1);
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioRngTest, CountsItsBytesAndNotifications) {
  driver_.set_desc(0, kBuf, 64, kWrite);
  driver_.set_desc(1, kBuf + 0x1000, 32, kWrite);
  driver_.publish(0);
  driver_.publish(1);
  rng_.notify(0);
  EXPECT_EQ(rng_.metrics()->entropy_bytes.total(), 96u);
  EXPECT_EQ(rng_.metrics()->entropy_event_count.total(), 1u);
  EXPECT_EQ(rng_.metrics()->entropy_rate_limiter_throttled.total(), 0u);
}

}  // namespace
}  // namespace dsec::virtio

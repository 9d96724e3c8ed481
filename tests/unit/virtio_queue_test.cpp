// The split virtqueue as a device sees it: chains a well-behaved driver writes come out as
// it meant them, and every malformed chain or ring index yields an error, not a crash, a
// hang or an access outside guest memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "tests/support/result_matchers.h"
#include "tests/support/virtq_driver.h"
#include "vmm/devices/virtio/queue.h"

namespace dsec::virtio {
namespace {

using testing::DriverQueue;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kIndirect;
using testing::kNext;
using testing::kWrite;
using testing::QueueLayout;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kRamEnd = 1 * kMiB;  // guest RAM is [0, 1 MiB)
constexpr uint64_t kBuf = 0x10000;      // where test buffers go
constexpr uint64_t kIndirectTable = 0x8000;

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, kRamEnd}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

class VirtQueueTest : public ::testing::Test {
 protected:
  // A queue of 8 entries, configured as a transport would, with the driver's view of it.
  void SetUp() override { configure(/*event_idx=*/false, /*indirect=*/true); }

  void configure(bool event_idx, bool indirect, QueueLayout layout = {}) {
    ASSERT_OK(memory_.fill(0, kBuf, 0));  // rings and indirect tables start zeroed
    driver_.emplace(memory_, layout);
    queue_.emplace(VirtQueue::create(kMaxSize).value());
    queue_->state() = driver_->queue_state(event_idx, indirect);
    ASSERT_OK(queue_->validate(memory_));
  }

  // Pops one chain that must be there.
  DescriptorChain pop_chain() {
    auto chain = queue_->pop(memory_);
    EXPECT_TRUE(chain.has_value()) << chain.error().message();
    if (!chain || !chain->has_value()) {
      ADD_FAILURE() << "no chain available";
      return {};
    }
    return std::move(**chain);
  }

  // Pops, expecting an error that mentions `text`; then the queue must stay broken.
  void expect_rejected(const std::string& text) {
    auto chain = queue_->pop(memory_);
    ASSERT_FALSE(chain.has_value()) << "a malformed chain was accepted";
    EXPECT_THAT(chain.error().message(), HasSubstr(text));
    EXPECT_TRUE(queue_->state().broken);
    auto again = queue_->pop(memory_);
    ASSERT_FALSE(again.has_value());
    EXPECT_THAT(again.error().message(), HasSubstr("broken"));
  }

  static constexpr uint16_t kMaxSize = 8;
  GuestMemory memory_ = make_memory();
  std::optional<DriverQueue> driver_;
  std::optional<VirtQueue> queue_;
};

TEST(VirtQueueCreate, MaximumSizeMustBeAPowerOfTwoUpTo32768) {
  EXPECT_TRUE(VirtQueue::create(1).has_value());
  EXPECT_TRUE(VirtQueue::create(256).has_value());
  EXPECT_TRUE(VirtQueue::create(32768).has_value());
  for (const uint16_t bad : {0, 3, 100, 65535}) {
    auto queue = VirtQueue::create(bad);
    ASSERT_FALSE(queue.has_value()) << bad;
    EXPECT_THAT(queue.error().message(), HasSubstr("power of two"));
  }
}

TEST(VirtQueueCreate, AResetQueueIsNotReadyAndOffersItsMaximumSize) {
  auto queue = VirtQueue::create(64).value();
  queue.state().ready = true;
  queue.state().next_avail = 9;
  queue.reset();
  QueueState expected;
  expected.size = 64;
  EXPECT_EQ(queue.state(), expected);
}

TEST_F(VirtQueueTest, ValidateRefusesBadSizesMisalignedRingsAndRingsOutsideMemory) {
  const auto expect_invalid = [&](auto mutate, const std::string& text) {
    queue_->state() = driver_->queue_state();
    mutate(queue_->state());
    auto status = queue_->validate(memory_);
    ASSERT_FALSE(status.has_value()) << text;
    EXPECT_THAT(status.error().message(), HasSubstr(text));
  };
  expect_invalid([](QueueState& s) { s.size = 0; }, "queue size 0");
  expect_invalid([](QueueState& s) { s.size = 6; }, "queue size 6");
  expect_invalid([](QueueState& s) { s.size = 16; }, "queue size 16");  // above max 8
  expect_invalid([](QueueState& s) { s.desc_table += 8; }, "descriptor table at 0x1008 is not 16");
  expect_invalid([](QueueState& s) { s.avail_ring += 1; }, "available ring at 0x2001");
  expect_invalid([](QueueState& s) { s.used_ring += 2; }, "used ring at 0x3002");
  // The used ring of 8 entries is 70 bytes: one ending a byte past RAM is refused.
  expect_invalid([](QueueState& s) { s.used_ring = kRamEnd - 68; }, "used ring");
  expect_invalid([](QueueState& s) { s.desc_table = kRamEnd; }, "descriptor table");
  expect_invalid([](QueueState& s) { s.avail_ring = ~uint64_t{1}; }, "available ring");
}

TEST_F(VirtQueueTest, AnEmptyRingPopsNothing) {
  auto chain = queue_->pop(memory_);
  ASSERT_OK(chain);
  EXPECT_FALSE(chain->has_value());
  EXPECT_EQ(queue_->state().next_avail, 0);
}

TEST_F(VirtQueueTest, PopsASingleReadableDescriptor) {
  driver_->set_desc(3, kBuf, 512, 0);
  driver_->publish(3);
  const DescriptorChain chain = pop_chain();
  EXPECT_EQ(chain.head, 3);
  EXPECT_THAT(chain.readable, ElementsAre(GuestRange{kBuf, 512}));
  EXPECT_TRUE(chain.writable.empty());
  EXPECT_EQ(queue_->state().next_avail, 1);
  auto next = queue_->pop(memory_);
  ASSERT_OK(next);
  EXPECT_FALSE(next->has_value());
}

TEST_F(VirtQueueTest, PopsAChainOfReadableThenWritableBuffersInChainOrder) {
  // 5 -> 2 -> 7 -> 0: two readable, then two writable, scattered through the table.
  driver_->set_desc(5, kBuf, 16, kNext, 2);
  driver_->set_desc(2, kBuf + 0x100, 100, kNext, 7);
  driver_->set_desc(7, kBuf + 0x1000, 4096, kNext | kWrite, 0);
  driver_->set_desc(0, kBuf + 0x3000, 1, kWrite);
  driver_->publish(5);
  const DescriptorChain chain = pop_chain();
  EXPECT_EQ(chain.head, 5);
  EXPECT_THAT(chain.readable, ElementsAre(GuestRange{kBuf, 16}, GuestRange{kBuf + 0x100, 100}));
  EXPECT_THAT(chain.writable,
              ElementsAre(GuestRange{kBuf + 0x1000, 4096}, GuestRange{kBuf + 0x3000, 1}));
  EXPECT_EQ(chain.readable_bytes(), 116u);
  EXPECT_EQ(chain.writable_bytes(), 4097u);
}

TEST_F(VirtQueueTest, AChainMayUseEveryDescriptorOfTheTable) {
  for (uint16_t i = 0; i < 8; ++i) {
    driver_->set_desc(i, kBuf + i * 0x100, 0x100, i < 7 ? kNext : 0, i + 1);
  }
  driver_->publish(0);
  EXPECT_EQ(pop_chain().readable.size(), 8u);
}

TEST_F(VirtQueueTest, PopsChainsInTheOrderTheyWerePublishedAcrossTheIndexWrap) {
  // Both indices just below 2^16: the third chain takes avail idx across the wrap.
  queue_->state().next_avail = 0xfffe;
  driver_->set_avail_idx(0xfffe);
  for (uint16_t head : {4, 1, 6}) {
    driver_->set_desc(head, kBuf + head, 1, kWrite);
    driver_->publish(head);
  }
  EXPECT_EQ(driver_->avail_idx(), 1);
  EXPECT_EQ(pop_chain().head, 4);
  EXPECT_EQ(pop_chain().head, 1);
  EXPECT_EQ(pop_chain().head, 6);
  EXPECT_EQ(queue_->state().next_avail, 1);
}

TEST_F(VirtQueueTest, AddUsedFillsTheUsedRingAndPublishesItsIndex) {
  ASSERT_OK(queue_->add_used(memory_, 3, 512));
  ASSERT_OK(queue_->add_used(memory_, 7, 0));
  EXPECT_EQ(driver_->used_idx(), 2);
  EXPECT_EQ(driver_->used_elem(0), (DriverQueue::UsedElem{3, 512}));
  EXPECT_EQ(driver_->used_elem(1), (DriverQueue::UsedElem{7, 0}));
  EXPECT_EQ(queue_->state().next_used, 2);
}

TEST_F(VirtQueueTest, UsedIndexWrapsAt65536) {
  queue_->state().next_used = 0xffff;
  ASSERT_OK(queue_->add_used(memory_, 1, 10));
  EXPECT_EQ(driver_->used_idx(), 0);
  EXPECT_EQ(driver_->used_elem(0xffff), (DriverQueue::UsedElem{1, 10}));
}

TEST_F(VirtQueueTest, AddUsedRefusesAHeadOutsideTheQueue) {
  auto status = queue_->add_used(memory_, 8, 0);
  ASSERT_FALSE(status.has_value());
  EXPECT_THAT(status.error().message(), HasSubstr("used head 8"));
  EXPECT_EQ(driver_->used_idx(), 0);
}

TEST_F(VirtQueueTest, AQueueThatIsNotReadyDoesNoWork) {
  queue_->state().ready = false;
  driver_->set_desc(0, kBuf, 1, 0);
  driver_->publish(0);
  auto chain = queue_->pop(memory_);
  ASSERT_FALSE(chain.has_value());
  EXPECT_THAT(chain.error().message(), HasSubstr("not ready"));
  EXPECT_FALSE(queue_->add_used(memory_, 0, 0).has_value());
}

TEST_F(VirtQueueTest, ARestoredSizeThatIsNotAPowerOfTwoIsNeverUsedAsAMask) {
  queue_->state().size = 6;  // as from a corrupt snapshot: validate() was never called
  driver_->publish(0);
  auto chain = queue_->pop(memory_);
  ASSERT_FALSE(chain.has_value());
  EXPECT_THAT(chain.error().message(), HasSubstr("queue size 6"));
}

TEST_F(VirtQueueTest, SavedStateResumesInAFreshQueue) {
  driver_->set_desc(0, kBuf, 1, 0);
  driver_->set_desc(1, kBuf, 2, 0);
  driver_->publish(0);
  driver_->publish(1);
  EXPECT_EQ(pop_chain().head, 0);
  ASSERT_OK(queue_->add_used(memory_, 0, 0));

  auto resumed = VirtQueue::create(kMaxSize).value();
  resumed.state() = queue_->state();
  auto chain = resumed.pop(memory_);
  ASSERT_OK(chain);
  ASSERT_TRUE(chain->has_value());
  EXPECT_EQ((*chain)->head, 1);
  ASSERT_OK(resumed.add_used(memory_, 1, 2));
  EXPECT_EQ(driver_->used_idx(), 2);
}

// ---- Indirect descriptors.

TEST_F(VirtQueueTest, PopsAnIndirectTable) {
  driver_->set_desc_in(kIndirectTable, 0, kBuf, 16, kNext, 1);
  driver_->set_desc_in(kIndirectTable, 1, kBuf + 0x100, 512, kNext | kWrite, 2);
  driver_->set_desc_in(kIndirectTable, 2, kBuf + 0x300, 1, kWrite);
  driver_->set_desc(6, kIndirectTable, 3 * 16, kIndirect);
  driver_->publish(6);
  const DescriptorChain chain = pop_chain();
  EXPECT_EQ(chain.head, 6);
  EXPECT_THAT(chain.readable, ElementsAre(GuestRange{kBuf, 16}));
  EXPECT_THAT(chain.writable,
              ElementsAre(GuestRange{kBuf + 0x100, 512}, GuestRange{kBuf + 0x300, 1}));
}

TEST_F(VirtQueueTest, AnIndirectTableMayBeLongerThanTheQueueAndFollowDirectDescriptors) {
  // A direct readable descriptor, then an indirect table of 20 entries (queue size 8).
  constexpr uint16_t kEntries = 20;
  for (uint16_t i = 0; i < kEntries; ++i) {
    driver_->set_desc_in(kIndirectTable, i, kBuf + i * 0x10, 0x10,
                         static_cast<uint16_t>(kWrite | (i + 1 < kEntries ? kNext : 0)), i + 1);
  }
  driver_->set_desc(0, kBuf + 0x1000, 8, kNext, 1);
  driver_->set_desc(1, kIndirectTable, kEntries * 16, kIndirect | kWrite);  // WRITE is ignored
  driver_->publish(0);
  const DescriptorChain chain = pop_chain();
  EXPECT_THAT(chain.readable, ElementsAre(GuestRange{kBuf + 0x1000, 8}));
  EXPECT_EQ(chain.writable.size(), kEntries);
}

TEST_F(VirtQueueTest, RejectsIndirectDescriptorsUnlessNegotiated) {
  configure(/*event_idx=*/false, /*indirect=*/false);
  driver_->set_desc_in(kIndirectTable, 0, kBuf, 16, 0);
  driver_->set_desc(0, kIndirectTable, 16, kIndirect);
  driver_->publish(0);
  expect_rejected("VIRTIO_F_INDIRECT_DESC was not negotiated");
}

TEST_F(VirtQueueTest, RejectsAnIndirectDescriptorInsideAnIndirectTable) {
  driver_->set_desc_in(kIndirectTable, 0, kBuf, 16, kNext, 1);
  driver_->set_desc_in(kIndirectTable, 1, kIndirectTable, 32, kIndirect);
  driver_->set_desc(0, kIndirectTable, 32, kIndirect);
  driver_->publish(0);
  expect_rejected("indirect inside an indirect table");
}

TEST_F(VirtQueueTest, RejectsAnIndirectDescriptorThatAlsoHasNext) {
  driver_->set_desc_in(kIndirectTable, 0, kBuf, 16, 0);
  driver_->set_desc(0, kIndirectTable, 16, kIndirect | kNext, 1);
  driver_->set_desc(1, kBuf, 16, kWrite);
  driver_->publish(0);
  expect_rejected("indirect and also has NEXT");
}

TEST_F(VirtQueueTest, RejectsIndirectTablesOfBadLength) {
  for (const uint32_t bad_len : {0u, 8u, 17u, 40u, (32768u + 1) * 16}) {
    SCOPED_TRACE(bad_len);
    configure(false, true);
    driver_->set_desc(0, kIndirectTable, bad_len, kIndirect);
    driver_->publish(0);
    expect_rejected("non-zero multiple of 16");
  }
}

TEST_F(VirtQueueTest, RejectsAnIndirectTableOutsideGuestMemory) {
  driver_->set_desc(0, kRamEnd - 16, 32, kIndirect);  // its second entry is past RAM
  driver_->publish(0);
  expect_rejected("indirect table [0xffff0, +0x20) is not inside guest RAM");
}

TEST_F(VirtQueueTest, RejectsAnIndexOutsideTheIndirectTable) {
  driver_->set_desc_in(kIndirectTable, 0, kBuf, 16, kNext, 2);  // table has 2 entries
  driver_->set_desc(0, kIndirectTable, 32, kIndirect);
  driver_->publish(0);
  expect_rejected("indirect table: index 2 is outside the table of 2 entries");
}

TEST_F(VirtQueueTest, RejectsALoopInsideAnIndirectTable) {
  driver_->set_desc_in(kIndirectTable, 0, kBuf, 16, kNext, 1);
  driver_->set_desc_in(kIndirectTable, 1, kBuf, 16, kNext, 0);
  driver_->set_desc(0, kIndirectTable, 32, kIndirect);
  driver_->publish(0);
  expect_rejected("indirect table: chain is longer than its table of 2 entries");
}

// ---- Malformed direct chains and ring indices.

TEST_F(VirtQueueTest, RejectsABufferOutsideGuestMemory) {
  driver_->set_desc(0, kRamEnd + 0x1000, 16, 0);
  driver_->publish(0);
  expect_rejected("descriptor table: descriptor 0: buffer [0x101000, +0x10) is not inside");
}

TEST_F(VirtQueueTest, RejectsABufferThatRunsPastTheEndOfGuestMemory) {
  driver_->set_desc(0, kBuf, 16, kNext, 1);
  driver_->set_desc(1, kRamEnd - 8, 9, kWrite);
  driver_->publish(0);
  expect_rejected("chain at head 0: descriptor table: descriptor 1: buffer [0xffff8, +0x9)");
}

TEST_F(VirtQueueTest, RejectsABufferWhoseLengthWrapsTheAddressSpace) {
  driver_->set_desc(0, 0xffff'ffff'ffff'f000, 0x2000, 0);
  driver_->publish(0);
  expect_rejected("wraps past the top of the address space");
}

TEST_F(VirtQueueTest, RejectsALoop) {
  driver_->set_desc(0, kBuf, 16, kNext, 1);
  driver_->set_desc(1, kBuf, 16, kNext, 2);
  driver_->set_desc(2, kBuf, 16, kNext, 1);
  driver_->publish(0);
  expect_rejected("chain is longer than its table of 8 entries (a loop?)");
}

TEST_F(VirtQueueTest, RejectsADescriptorThatChainsToItself) {
  driver_->set_desc(4, kBuf, 16, kWrite | kNext, 4);
  driver_->publish(4);
  expect_rejected("a loop?");
}

TEST_F(VirtQueueTest, RejectsANextIndexOutsideTheTable) {
  driver_->set_desc(0, kBuf, 16, kNext, 8);
  driver_->publish(0);
  expect_rejected("descriptor table: index 8 is outside the table of 8 entries");
}

TEST_F(VirtQueueTest, RejectsAHeadIndexOutsideTheTable) {
  driver_->publish(0xffff);
  expect_rejected("chain at head 65535: descriptor table: index 65535 is outside");
}

TEST_F(VirtQueueTest, RejectsAReadableBufferAfterAWritableOne) {
  driver_->set_desc(0, kBuf, 16, kWrite | kNext, 1);
  driver_->set_desc(1, kBuf + 0x100, 16, 0);
  driver_->publish(0);
  expect_rejected("descriptor 1 is device-readable but follows a device-writable one");
}

TEST_F(VirtQueueTest, AcceptsAnAvailIndexExactlyOneQueueAhead) {
  for (uint16_t i = 0; i < 8; ++i) {
    driver_->set_desc(i, kBuf, 1, 0);
    driver_->publish(i);
  }
  for (uint16_t i = 0; i < 8; ++i) {
    EXPECT_EQ(pop_chain().head, i);
  }
}

TEST_F(VirtQueueTest, AnAvailIndexMoreThanAQueueAheadBreaksTheQueueUntilReset) {
  driver_->set_desc(0, kBuf, 1, 0);
  driver_->set_avail_idx(9);
  expect_rejected("available idx 9 is 9 entries ahead of the device's 0, more than the queue");
  // Putting idx right does not mend it: the device must be reset.
  driver_->set_avail_idx(1);
  EXPECT_FALSE(queue_->pop(memory_).has_value());
  EXPECT_FALSE(queue_->add_used(memory_, 0, 0).has_value());
  queue_->reset();
  EXPECT_FALSE(queue_->state().broken);
}

TEST_F(VirtQueueTest, AnAvailIndexBehindTheDeviceIsAlsoTooFarAhead) {
  queue_->state().next_avail = 5;
  driver_->set_avail_idx(4);  // 65535 entries "ahead"
  expect_rejected("65535 entries ahead");
}

// ---- Notification suppression.

TEST(VringNeedEvent, NotifiesWhenUsedEventLiesInTheNewlyUsedRange) {
  // Moving from 10 to 13 crosses used_event 10, 11 and 12, not 13 or 9.
  EXPECT_TRUE(vring_need_event(10, 13, 10));
  EXPECT_TRUE(vring_need_event(12, 13, 10));
  EXPECT_FALSE(vring_need_event(13, 13, 10));
  EXPECT_FALSE(vring_need_event(9, 13, 10));
  // Nothing new: never.
  EXPECT_FALSE(vring_need_event(10, 10, 10));
  // Across the 2^16 wrap.
  EXPECT_TRUE(vring_need_event(0xffff, 2, 0xfffe));
  EXPECT_TRUE(vring_need_event(1, 2, 0xfffe));
  EXPECT_FALSE(vring_need_event(2, 2, 0xfffe));
  EXPECT_FALSE(vring_need_event(0xfffd, 2, 0xfffe));
}

TEST_F(VirtQueueTest, WithoutEventIdxNotifiesUnlessTheDriverSetNoInterrupt) {
  ASSERT_OK(queue_->add_used(memory_, 0, 0));
  ASSERT_OK_AND_ASSIGN(bool wanted, queue_->needs_notification(memory_));
  EXPECT_TRUE(wanted);
  driver_->set_avail_flags(1);  // VIRTQ_AVAIL_F_NO_INTERRUPT
  ASSERT_OK(queue_->add_used(memory_, 0, 0));
  ASSERT_OK_AND_ASSIGN(wanted, queue_->needs_notification(memory_));
  EXPECT_FALSE(wanted);
}

TEST_F(VirtQueueTest, WithEventIdxNotifiesOnlyWhenUsedIdxPassesUsedEvent) {
  configure(/*event_idx=*/true, /*indirect=*/false);
  driver_->set_avail_flags(1);  // ignored with EVENT_IDX
  // The first check after a reset always notifies.
  ASSERT_OK(queue_->add_used(memory_, 0, 0));
  ASSERT_OK_AND_ASSIGN(bool wanted, queue_->needs_notification(memory_));
  EXPECT_TRUE(wanted);
  // The driver asks to hear when used idx passes 3: entry 1 and 2 are silent, 3 is not.
  driver_->set_used_event(3);
  ASSERT_OK(queue_->add_used(memory_, 1, 0));
  ASSERT_OK(queue_->add_used(memory_, 2, 0));
  ASSERT_OK_AND_ASSIGN(wanted, queue_->needs_notification(memory_));
  EXPECT_FALSE(wanted);
  ASSERT_OK(queue_->add_used(memory_, 3, 0));
  ASSERT_OK_AND_ASSIGN(wanted, queue_->needs_notification(memory_));
  EXPECT_TRUE(wanted);
  // Nothing used since: no notification, whatever used_event says.
  ASSERT_OK_AND_ASSIGN(wanted, queue_->needs_notification(memory_));
  EXPECT_FALSE(wanted);
}

TEST_F(VirtQueueTest, WithEventIdxABatchNotifiesOnceWhenItCrossesUsedEvent) {
  configure(/*event_idx=*/true, /*indirect=*/false);
  ASSERT_OK(queue_->needs_notification(memory_));  // settle the first-check notification
  driver_->set_used_event(1);
  for (uint16_t head = 0; head < 4; ++head) {
    ASSERT_OK(queue_->add_used(memory_, head, 0));
  }
  ASSERT_OK_AND_ASSIGN(bool wanted, queue_->needs_notification(memory_));
  EXPECT_TRUE(wanted);  // used idx went 0 -> 4, past used_event 1
}

TEST_F(VirtQueueTest, WithEventIdxFindingTheRingEmptyPublishesAvailEvent) {
  configure(/*event_idx=*/true, /*indirect=*/false);
  driver_->set_desc(0, kBuf, 1, 0);
  driver_->publish(0);
  driver_->publish(0);
  EXPECT_EQ(pop_chain().head, 0);
  EXPECT_EQ(pop_chain().head, 0);
  EXPECT_EQ(driver_->avail_event(), 0);  // not yet: the device was busy
  auto empty = queue_->pop(memory_);
  ASSERT_OK(empty);
  EXPECT_FALSE(empty->has_value());
  EXPECT_EQ(driver_->avail_event(), 2);  // notify me when you publish entry 2
}

TEST_F(VirtQueueTest, WithoutEventIdxAvailEventIsNeverWritten) {
  auto empty = queue_->pop(memory_);
  ASSERT_OK(empty);
  EXPECT_EQ(driver_->avail_event(), 0);
  ASSERT_OK(memory_.write_obj<uint16_t>(0x3000 + 4 + 8 * 8, 0xabcd));
  ASSERT_OK(queue_->pop(memory_));
  EXPECT_EQ(driver_->avail_event(), 0xabcd);
}

TEST_F(VirtQueueTest, DescribeShowsTheDevicesIndicesBesideWhatTheDriverWrote) {
  configure(/*event_idx=*/true, /*indirect=*/false);
  driver_->set_desc(0, kBuf, 1, 0);
  driver_->publish(0);
  driver_->publish(0);
  driver_->set_used_event(5);
  pop_chain();
  ASSERT_OK(queue_->add_used(memory_, 0, 0));
  ASSERT_OK(queue_->needs_notification(memory_));
  EXPECT_EQ(queue_->describe(memory_),
            "size 8, device next avail 1 next used 1; driver avail idx 2, used idx 1; "
            "used_event 5, avail_event 0, last notified at used 1");

  configure(/*event_idx=*/false, /*indirect=*/false);
  driver_->set_avail_flags(1);
  EXPECT_EQ(queue_->describe(memory_),
            "size 8, device next avail 0 next used 0; driver avail idx 0, used idx 0; "
            "avail flags 1");
}

TEST_F(VirtQueueTest, DescribeSaysWhatItCannotReadAndWhenTheQueueIsBroken) {
  // A ring the driver moved out of guest memory after validation (a restored state, say).
  queue_->state().avail_ring = kRamEnd + 0x1000;
  driver_->set_avail_idx(100);  // where the ring was: not read
  EXPECT_THAT(queue_->describe(memory_), HasSubstr("driver avail idx unreadable"));
  queue_->state().broken = true;
  EXPECT_THAT(queue_->describe(memory_), HasSubstr("BROKEN"));
  queue_->state().ready = false;
  EXPECT_EQ(queue_->describe(memory_), "not ready");
}

}  // namespace
}  // namespace dsec::virtio

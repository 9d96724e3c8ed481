// virtio-blk on a real temporary file with a real io_uring event loop, driven the way a
// guest driver drives it: requests written into guest memory, the avail ring published,
// the queue notified, and the answers read back from the used ring and the status bytes.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/virtq_driver.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/virtio/block.h"
#include "vmm/devices/virtio/virtio_spec.h"
#include "vmm/io/event_loop.h"

namespace dsec::virtio {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::DriverQueue;
using ::testing::HasSubstr;
using testing::kNext;
using testing::kWrite;
using testing::QueueLayout;

constexpr uint64_t kRamEnd = 4 << 20;  // guest RAM is [0, 4 MiB)
constexpr uint64_t kHeaders = 0x8000;  // request i's header at kHeaders + 0x40 * i
constexpr uint64_t kData = 0x100000;   // request i's data at kData + 0x2000 * i
constexpr uint64_t kDiskSectors = 128;
constexpr uint8_t kUntouched = 0xaa;  // what guest buffers hold before the device answers

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, kRamEnd}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

int count_open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

// A scratch file of `size` bytes, byte i holding (i * 7 + i / 512) & 0xff, removed at the end.
class TempDisk {
 public:
  explicit TempDisk(uint64_t size) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/dsec-blk-test-XXXXXX";
    UniqueFd fd(::mkostemp(path_.data(), O_CLOEXEC));
    std::string bytes(size, '\0');
    for (uint64_t i = 0; i < size; ++i) {
      bytes[i] = static_cast<char>(expected_byte(i));
    }
    EXPECT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), 0), static_cast<ssize_t>(size));
  }
  TempDisk(const TempDisk&) = delete;
  TempDisk& operator=(const TempDisk&) = delete;
  ~TempDisk() { ::unlink(path_.c_str()); }

  static uint8_t expected_byte(uint64_t i) { return static_cast<uint8_t>(i * 7 + i / 512); }
  const std::string& path() const { return path_; }

  std::vector<uint8_t> read(uint64_t offset, uint64_t len) const {
    UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    std::vector<uint8_t> out(len);
    EXPECT_EQ(::pread(fd.get(), out.data(), len, static_cast<off_t>(offset)),
              static_cast<ssize_t>(len));
    return out;
  }

 private:
  std::string path_;
};

std::vector<uint8_t> file_bytes(uint64_t offset, uint64_t len) {
  std::vector<uint8_t> out(len);
  for (uint64_t i = 0; i < len; ++i) {
    out[i] = TempDisk::expected_byte(offset + i);
  }
  return out;
}

class VirtioBlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(memory_.fill(0, kRamEnd, 0));
    ASSERT_OK(memory_.fill(kData, kRamEnd - kData, kUntouched));
  }

  // Creates the device and activates it as a transport would, with features negotiated.
  void open_device(BlockOptions options = {}) {
    auto created = VirtioBlock::create(disk_.path(), options, memory_, *loop_);
    ASSERT_OK(created);
    device_ = std::move(*created);
    queues_.clear();
    queues_.push_back(VirtQueue::create(kBlockQueueSize).value());
    queues_[0].state() = driver_.queue_state(/*event_idx=*/false, /*indirect=*/true);
    ASSERT_OK(queues_[0].validate(memory_));
    ASSERT_OK(device_->activate(queues_, device_->features() | feature_bit(kFeatureVersion1),
                                interrupt_));
  }

  static uint64_t header_gpa(uint16_t slot) { return kHeaders + 0x40 * uint64_t{slot}; }
  static uint64_t status_gpa(uint16_t slot) { return header_gpa(slot) + 0x20; }
  static uint64_t data_gpa(uint16_t slot) { return kData + 0x2000 * uint64_t{slot}; }

  // Writes request `slot` (descriptors 3*slot .. 3*slot+2: header, data, status) and
  // publishes it. Data is device-writable except for OUT; no data descriptor if data_len is 0.
  void add_request(uint16_t slot, uint32_t type, uint64_t sector, uint32_t data_len) {
    const uint64_t header = header_gpa(slot);
    ASSERT_OK(memory_.write_obj<uint32_t>(header, type));
    ASSERT_OK(memory_.write_obj<uint32_t>(header + 4, 0));
    ASSERT_OK(memory_.write_obj<uint64_t>(header + 8, sector));
    ASSERT_OK(memory_.write_obj<uint8_t>(status_gpa(slot), kUntouched));
    const auto d = static_cast<uint16_t>(3 * slot);
    const uint16_t status_desc = data_len != 0 ? d + 2 : d + 1;
    driver_.set_desc(d, header, 16, kNext, d + 1);
    if (data_len != 0) {
      driver_.set_desc(d + 1, data_gpa(slot), data_len,
                       static_cast<uint16_t>(kNext | (type == kBlkTypeOut ? 0 : kWrite)), d + 2);
    }
    driver_.set_desc(status_desc, status_gpa(slot), 1, kWrite);
    driver_.publish(d);
  }

  // Turns the loop until the driver has `count` used entries; false if not within 5 s.
  bool wait_used(uint16_t count) {
    const auto deadline = Clock::now() + 5s;
    while (driver_.used_idx() != count) {
      if (Clock::now() >= deadline) {
        return false;
      }
      auto turned = loop_->run_once(10ms);
      if (!turned) {
        ADD_FAILURE() << turned.error().message();
        return false;
      }
    }
    return true;
  }

  // Turns the loop until no request is in flight.
  bool drain() {
    const auto deadline = Clock::now() + 5s;
    while (device_->requests_in_flight() != 0) {
      if (Clock::now() >= deadline || !loop_->run_once(10ms)) {
        return false;
      }
    }
    return true;
  }

  // Notifies, waits for `count` used entries and returns the status byte of `slot`.
  uint8_t run_request(uint16_t slot, uint16_t count = 1) {
    device_->notify(0);
    EXPECT_TRUE(wait_used(count)) << "the request was not answered";
    return memory_.read_obj<uint8_t>(status_gpa(slot)).value();
  }

  std::vector<uint8_t> guest_bytes(uint64_t gpa, uint64_t len) {
    std::vector<uint8_t> out(len);
    EXPECT_TRUE(memory_.read(gpa, out).has_value());
    return out;
  }

  bool untouched(uint64_t gpa, uint64_t len) {
    return guest_bytes(gpa, len) == std::vector<uint8_t>(len, kUntouched);
  }

  GuestMemory memory_ = make_memory();
  std::optional<io::EventLoop> loop_{io::EventLoop::create().value()};
  TempDisk disk_{kDiskSectors * 512};
  DriverQueue driver_{memory_,
                      QueueLayout{.size = 32, .desc = 0x1000, .avail = 0x2000, .used = 0x3000}};
  int interrupts_ = 0;
  std::shared_ptr<VirtioInterrupt> interrupt_ =
      std::make_shared<VirtioInterrupt>([this](bool raised) { interrupts_ += raised ? 1 : 0; });
  std::vector<VirtQueue> queues_;
  std::unique_ptr<VirtioBlock> device_;
};

TEST_F(VirtioBlockTest, OffersItsFeaturesAndConfiguration) {
  open_device();
  EXPECT_EQ(device_->device_type(), 2u);
  EXPECT_EQ(device_->queue_max_sizes(), std::vector<uint16_t>{256});
  const uint64_t f = device_->features();
  EXPECT_NE(f & feature_bit(kBlkFeatureFlush), 0u);
  EXPECT_NE(f & feature_bit(kBlkFeatureSegMax), 0u);
  EXPECT_NE(f & feature_bit(kFeatureIndirectDesc), 0u);
  EXPECT_NE(f & feature_bit(kFeatureEventIdx), 0u);
  EXPECT_EQ(f & feature_bit(kBlkFeatureRo), 0u);

  std::array<uint8_t, 8> capacity{};
  device_->read_config(0, capacity);
  EXPECT_EQ(capacity, (std::array<uint8_t, 8>{kDiskSectors, 0, 0, 0, 0, 0, 0, 0}));
  std::array<uint8_t, 4> seg_max{};
  device_->read_config(12, seg_max);
  EXPECT_EQ(seg_max, (std::array<uint8_t, 4>{254, 0, 0, 0}));
  std::array<uint8_t, 4> blk_size{};
  device_->read_config(20, blk_size);
  EXPECT_EQ(blk_size, (std::array<uint8_t, 4>{0, 2, 0, 0}));
  std::array<uint8_t, 4> past_end{1, 1, 1, 1};
  device_->read_config(0x1000, past_end);
  EXPECT_EQ(past_end, (std::array<uint8_t, 4>{1, 1, 1, 1}));  // left as the transport gave it
}

TEST_F(VirtioBlockTest, ReadReturnsTheFilesBytes) {
  open_device();
  add_request(0, kBlkTypeIn, 3, 1024);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  EXPECT_EQ(guest_bytes(data_gpa(0), 1024), file_bytes(3 * 512, 1024));
  EXPECT_TRUE(untouched(data_gpa(0) + 1024, 16));
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 1025}));
  EXPECT_GE(interrupts_, 1);
}

TEST_F(VirtioBlockTest, WriteReachesTheFile) {
  open_device();
  ASSERT_OK(memory_.fill(data_gpa(0), 512, 0x5c));
  add_request(0, kBlkTypeOut, kDiskSectors - 1, 512);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  EXPECT_EQ(disk_.read((kDiskSectors - 1) * 512, 512), std::vector<uint8_t>(512, 0x5c));
  EXPECT_EQ(disk_.read((kDiskSectors - 2) * 512, 512), file_bytes((kDiskSectors - 2) * 512, 512));
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 1}));
}

TEST_F(VirtioBlockTest, FlushSucceeds) {
  open_device();
  add_request(0, kBlkTypeFlush, 0, 0);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 1}));
}

TEST_F(VirtioBlockTest, GetIdReturnsTheConfiguredId) {
  open_device({.id = "scratch-disk-7"});
  add_request(0, kBlkTypeGetId, 0, 32);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  std::vector<uint8_t> expected(20, 0);
  const std::string id = "scratch-disk-7";
  std::copy(id.begin(), id.end(), expected.begin());
  EXPECT_EQ(guest_bytes(data_gpa(0), 20), expected);
  EXPECT_TRUE(untouched(data_gpa(0) + 20, 12));
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 21}));
}

TEST_F(VirtioBlockTest, GetIdWithoutAConfiguredIdDerivesOneFromTheFile) {
  open_device();
  add_request(0, kBlkTypeGetId, 0, 20);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  const std::vector<uint8_t> id = guest_bytes(data_gpa(0), 20);
  EXPECT_NE(id[0], 0) << "the derived id is empty";
  EXPECT_NE(id, std::vector<uint8_t>(20, kUntouched));
}

TEST_F(VirtioBlockTest, ReadOnlyDriveOffersRoAndRefusesWrites) {
  open_device({.read_only = true, .id = {}});
  EXPECT_NE(device_->features() & feature_bit(kBlkFeatureRo), 0u);
  ASSERT_OK(memory_.fill(data_gpa(0), 512, 0x5c));
  add_request(0, kBlkTypeOut, 0, 512);
  EXPECT_EQ(run_request(0), kBlkStatusIoErr);
  EXPECT_EQ(disk_.read(0, 512), file_bytes(0, 512));
  add_request(1, kBlkTypeIn, 0, 512);
  EXPECT_EQ(run_request(1, 2), kBlkStatusOk);
  EXPECT_EQ(guest_bytes(data_gpa(1), 512), file_bytes(0, 512));
}

TEST_F(VirtioBlockTest, OutOfRangeSectorIsAnIoErrorAndTouchesNoMemory) {
  open_device();
  add_request(0, kBlkTypeIn, kDiskSectors - 1, 1024);  // its second sector is past the end
  EXPECT_EQ(run_request(0), kBlkStatusIoErr);
  EXPECT_TRUE(untouched(data_gpa(0), 0x2000));
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 1}));
}

TEST_F(VirtioBlockTest, SectorWhoseByteOffsetOverflowsIsAnIoError) {
  open_device();
  add_request(0, kBlkTypeIn, uint64_t{1} << 55, 512);  // * 512 wraps to offset 0
  EXPECT_EQ(run_request(0), kBlkStatusIoErr);
  EXPECT_TRUE(untouched(data_gpa(0), 512));
  add_request(1, kBlkTypeOut, ~uint64_t{0}, 512);
  EXPECT_EQ(run_request(1, 2), kBlkStatusIoErr);
  EXPECT_EQ(disk_.read(0, kDiskSectors * 512), file_bytes(0, kDiskSectors * 512));
}

TEST_F(VirtioBlockTest, HeaderTooShortIsAnIoError) {
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);
  driver_.set_desc(0, header_gpa(0), 12, kNext, 1);
  EXPECT_EQ(run_request(0), kBlkStatusIoErr);
  EXPECT_TRUE(untouched(data_gpa(0), 512));
}

TEST_F(VirtioBlockTest, MissingStatusByteReturnsTheChainWithNothingWritten) {
  open_device();
  ASSERT_OK(memory_.fill(data_gpa(0), 512, 0x5c));
  add_request(0, kBlkTypeOut, 0, 512);
  driver_.set_desc(1, data_gpa(0), 512, 0);  // the chain ends after the data
  EXPECT_EQ(run_request(0), kUntouched);
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 0}));
  EXPECT_EQ(disk_.read(0, 512), file_bytes(0, 512));
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioBlockTest, StatusInAReadOnlyDescriptorIsNoStatus) {
  open_device();
  add_request(0, kBlkTypeOut, 0, 512);
  driver_.set_desc(2, status_gpa(0), 1, 0);  // status without VIRTQ_DESC_F_WRITE
  EXPECT_EQ(run_request(0), kUntouched);
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 0}));
  EXPECT_EQ(disk_.read(0, 512), file_bytes(0, 512));
}

TEST_F(VirtioBlockTest, DataNotAMultipleOf512IsAnIoError) {
  open_device();
  add_request(0, kBlkTypeIn, 0, 500);
  EXPECT_EQ(run_request(0), kBlkStatusIoErr);
  EXPECT_TRUE(untouched(data_gpa(0), 512));
}

TEST_F(VirtioBlockTest, UnsupportedTypeIsUnsupp) {
  open_device();
  add_request(0, 11 /* VIRTIO_BLK_T_DISCARD */, 0, 16);
  EXPECT_EQ(run_request(0), kBlkStatusUnsupp);
  EXPECT_EQ(disk_.read(0, kDiskSectors * 512), file_bytes(0, kDiskSectors * 512));
}

TEST_F(VirtioBlockTest, ChainThatLoopsBreaksTheQueueAndAsksForAReset) {
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);  // well-formed, and in flight when the queue breaks
  add_request(1, kBlkTypeIn, 0, 512);
  driver_.set_desc(5, status_gpa(1), 1, kWrite | kNext, 5);  // the status names itself next
  device_->notify(0);
  EXPECT_TRUE(queues_[0].state().broken);
  EXPECT_TRUE(interrupt_->needs_reset());
  EXPECT_EQ(device_->requests_in_flight(), 1u);
  // The broken queue returns nothing, not even what was in flight, takes no more work,
  // and asks for the reset once.
  const int interrupts = interrupts_;
  add_request(2, kBlkTypeIn, 0, 512);
  device_->notify(0);
  ASSERT_TRUE(drain());
  EXPECT_EQ(interrupts_, interrupts);
  EXPECT_EQ(driver_.used_idx(), 0);
  EXPECT_TRUE(untouched(data_gpa(2), 512));
}

TEST_F(VirtioBlockTest, BufferOutsideGuestMemoryBreaksTheQueue) {
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);
  driver_.set_desc(1, kRamEnd - 256, 512, kNext | kWrite, 2);
  device_->notify(0);
  EXPECT_TRUE(queues_[0].state().broken);
  EXPECT_TRUE(interrupt_->needs_reset());
  EXPECT_EQ(driver_.used_idx(), 0);
}

TEST_F(VirtioBlockTest, DiskThatShrankUnderTheGuestGivesAnIoError) {
  open_device();
  // Someone on the host cut the file to 64 sectors: a read across the new end gets one
  // sector (a short read, resubmitted), then end of file.
  ASSERT_EQ(::truncate(disk_.path().c_str(), 64 * 512), 0);
  add_request(0, kBlkTypeIn, 63, 1024);
  EXPECT_EQ(run_request(0), kBlkStatusIoErr);
  EXPECT_EQ(driver_.used_elem(0), (DriverQueue::UsedElem{0, 1}));
  add_request(1, kBlkTypeIn, 62, 1024);
  EXPECT_EQ(run_request(1, 2), kBlkStatusOk);
  EXPECT_EQ(guest_bytes(data_gpa(1), 1024), file_bytes(62 * 512, 1024));
  EXPECT_EQ(device_->requests_in_flight(), 0u);
}

TEST_F(VirtioBlockTest, SeveralRequestsInFlightAllComplete) {
  open_device();
  for (uint16_t slot = 0; slot < 5; ++slot) {
    add_request(slot, kBlkTypeIn, 10 * slot, 4096);
  }
  ASSERT_OK(memory_.fill(data_gpa(5), 2048, 0x3e));
  add_request(5, kBlkTypeOut, 100, 2048);
  device_->notify(0);
  // Submitted, not completed: completions run only on the loop's turns.
  EXPECT_EQ(device_->requests_in_flight(), 6u);
  EXPECT_EQ(driver_.used_idx(), 0);
  ASSERT_TRUE(wait_used(6));
  std::vector<uint32_t> heads;
  for (uint16_t i = 0; i < 6; ++i) {
    heads.push_back(driver_.used_elem(i).id);
  }
  EXPECT_THAT(heads, ::testing::UnorderedElementsAre(0, 3, 6, 9, 12, 15));
  for (uint16_t slot = 0; slot < 5; ++slot) {
    EXPECT_EQ(memory_.read_obj<uint8_t>(status_gpa(slot)).value(), kBlkStatusOk);
    EXPECT_EQ(guest_bytes(data_gpa(slot), 4096), file_bytes(10 * 512 * slot, 4096)) << slot;
  }
  EXPECT_EQ(memory_.read_obj<uint8_t>(status_gpa(5)).value(), kBlkStatusOk);
  EXPECT_EQ(disk_.read(100 * 512, 2048), std::vector<uint8_t>(2048, 0x3e));
  EXPECT_EQ(device_->requests_in_flight(), 0u);
}

TEST_F(VirtioBlockTest, AHostileDriverCannotPileUpUnboundedRequests) {
  // The same head published again and again: the device takes 256 at most at a time and
  // finishes the rest as completions make room. (The ring may run up to its size, 32
  // entries, ahead of the device: 256 + 16 stays within that.)
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);
  constexpr uint16_t kPublished = 256 + 16;
  uint16_t published = 1;
  device_->notify(0);
  while (published < kPublished) {
    for (int i = 0; i < 8 && published < kPublished; ++i, ++published) {
      driver_.publish(0);
    }
    device_->notify(0);
    ASSERT_LE(device_->requests_in_flight(), 256u);
  }
  EXPECT_EQ(device_->requests_in_flight(), 256u);
  ASSERT_TRUE(wait_used(kPublished));
  EXPECT_EQ(memory_.read_obj<uint8_t>(status_gpa(0)).value(), kBlkStatusOk);
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioBlockTest, ARateLimitedDriveLeavesRequestsInTheRingUntilItsTimerResumesIt) {
  // 4 KiB per 400 ms: the first read goes at once, each other one a refill later, taken by
  // the limiter's timer on the loop with no further notification from the driver.
  open_device({.read_only = false,
               .id = "",
               .rate_limiter = {.bandwidth =
                                    devices::TokenBucketConfig{
                                        .size = 4096, .one_time_burst = 0, .refill_time_ms = 400},
                                .ops = std::nullopt}});
  for (uint16_t slot = 0; slot < 3; ++slot) {
    add_request(slot, kBlkTypeIn, 8 * slot, 4096);
  }
  device_->notify(0);
  device_->notify(0);  // asking again takes nothing more
  EXPECT_EQ(device_->requests_in_flight() + driver_.used_idx(), 1u);
  EXPECT_EQ(queues_[0].state().next_avail, 1);  // the others are still in the ring
  ASSERT_TRUE(wait_used(3));
  for (uint16_t slot = 0; slot < 3; ++slot) {
    EXPECT_EQ(memory_.read_obj<uint8_t>(status_gpa(slot)).value(), kBlkStatusOk);
    EXPECT_EQ(guest_bytes(data_gpa(slot), 4096), file_bytes(8 * 512 * slot, 4096)) << slot;
  }
  EXPECT_FALSE(interrupt_->needs_reset());
}

TEST_F(VirtioBlockTest, ANewRateLimiterTakesWhatTheOldOneHeldBack) {
  // One request per 10 s: the second waits, until the limit is lifted (a PATCH).
  open_device({.read_only = false,
               .id = "",
               .rate_limiter = {.bandwidth = std::nullopt,
                                .ops = devices::TokenBucketConfig{
                                    .size = 1, .one_time_burst = 0, .refill_time_ms = 10'000}}});
  add_request(0, kBlkTypeIn, 0, 512);
  add_request(1, kBlkTypeIn, 1, 512);
  device_->notify(0);
  EXPECT_EQ(device_->requests_in_flight() + driver_.used_idx(), 1u);
  device_->set_rate_limiter({});
  EXPECT_EQ(device_->requests_in_flight() + driver_.used_idx(), 2u);
  ASSERT_TRUE(wait_used(2));
  EXPECT_EQ(guest_bytes(data_gpa(1), 512), file_bytes(512, 512));
}

TEST_F(VirtioBlockTest, ResetWhileRequestsAreInFlightReturnsNothingAfterwards) {
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);
  add_request(1, kBlkTypeFlush, 0, 0);
  device_->notify(0);
  ASSERT_EQ(device_->requests_in_flight(), 2u);
  device_->reset();
  ASSERT_TRUE(drain());
  EXPECT_EQ(driver_.used_idx(), 0);
  EXPECT_EQ(interrupts_, 0);
}

TEST_F(VirtioBlockTest, ARequestAfterAResetWaitsOnlyForTheOldRequestsToEnd) {
  // The hostile guest's "a reset with 256 reads of the whole disk in flight, then a read at
  // once": the old requests hold every place in flight, so the new activation's first
  // request must wait for room, and the old requests' completions (which the reset
  // disowned) must make it.
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);
  for (uint16_t published = 1; device_->requests_in_flight() < 256;) {
    for (int i = 0; i < 8; ++i, ++published) {
      driver_.publish(0);
    }
    device_->notify(0);
  }
  device_->reset();
  ASSERT_OK(memory_.fill(0x2000, 0x2000, 0));  // the driver's rings start again
  queues_[0].reset();
  queues_[0].state() = driver_.queue_state(/*event_idx=*/false, /*indirect=*/true);
  ASSERT_OK(
      device_->activate(queues_, device_->features() | feature_bit(kFeatureVersion1), interrupt_));
  add_request(1, kBlkTypeIn, 1, 512);
  EXPECT_EQ(run_request(1), kBlkStatusOk);
  EXPECT_EQ(guest_bytes(data_gpa(1), 512), file_bytes(512, 512));
}

TEST_F(VirtioBlockTest, DestroyedWithRequestsInFlight) {
  open_device();
  add_request(0, kBlkTypeIn, 0, 512);
  device_->notify(0);
  device_.reset();
  // The completion finds the device gone and touches nothing.
  const auto deadline = Clock::now() + 5s;
  while (loop_->pending_operations() > 1 && Clock::now() < deadline) {
    ASSERT_OK(loop_->run_once(10ms));
  }
  EXPECT_EQ(loop_->pending_operations(), 1u);  // the loop's own wake-up watch
  EXPECT_EQ(driver_.used_idx(), 0);
}

uint64_t config_capacity(const VirtioBlock& device) {
  uint64_t sectors = 0;
  device.read_config(blk_config::kCapacity,
                     std::span(reinterpret_cast<uint8_t*>(&sectors), sizeof sectors));
  return sectors;
}

// Firecracker's PATCH /drives/{id} with path_on_host: the next request reads the new file,
// whose size the configuration space has, and the driver gets a configuration change.
TEST_F(VirtioBlockTest, AReplacedDiskServesTheNextRequestAndTheDriverIsToldItsSize) {
  open_device();
  TempDisk bigger((kDiskSectors * 2) * 512);
  ASSERT_EQ(::pwrite(UniqueFd(::open(bigger.path().c_str(), O_WRONLY | O_CLOEXEC)).get(),
                     "the new disk", 12, kDiskSectors * 512),
            12);
  const uint32_t generation = interrupt_->config_generation();
  ASSERT_OK(device_->replace_disk(bigger.path()));
  EXPECT_EQ(config_capacity(*device_), kDiskSectors * 2);
  EXPECT_EQ(device_->state().capacity_sectors, kDiskSectors * 2);
  EXPECT_EQ(device_->path(), bigger.path());
  EXPECT_NE(interrupt_->status() & kInterruptConfigChange, 0u);
  EXPECT_EQ(interrupt_->config_generation(), generation + 1);
  // A sector past the old end: in range now, and from the new file.
  add_request(0, kBlkTypeIn, kDiskSectors, 512);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  const auto read = guest_bytes(data_gpa(0), 12);
  EXPECT_EQ(std::string(read.begin(), read.end()), "the new disk");
}

TEST_F(VirtioBlockTest, AFileThatCannotBeTheDiskChangesNothing) {
  open_device({.read_only = true, .id = {}});
  const uint32_t generation = interrupt_->config_generation();
  TempDisk odd(1000);
  const std::string dir = std::filesystem::temp_directory_path().string();
  for (const std::string& path : {std::string("/nonexistent/disk.img"), odd.path(), dir}) {
    SCOPED_TRACE(path);
    EXPECT_FALSE(device_->replace_disk(path));
  }
  EXPECT_EQ(device_->path(), disk_.path());
  EXPECT_EQ(config_capacity(*device_), kDiskSectors);
  EXPECT_EQ(interrupt_->config_generation(), generation);
  add_request(0, kBlkTypeIn, 3, 512);
  EXPECT_EQ(run_request(0), kBlkStatusOk);
  EXPECT_EQ(guest_bytes(data_gpa(0), 512), file_bytes(3 * 512, 512));
  // A read-only drive stays one: its writes are refused on the new file too.
  TempDisk other(kDiskSectors * 512);
  ASSERT_OK(device_->replace_disk(other.path()));
  EXPECT_NE(device_->features() & feature_bit(kBlkFeatureRo), 0u);
  add_request(1, kBlkTypeOut, 0, 512);
  EXPECT_EQ(run_request(1, 2), kBlkStatusIoErr);
  EXPECT_EQ(other.read(0, 512), file_bytes(0, 512));
}

// A request in flight when the disk is replaced ends on the file it was started on, which
// is closed after it: no fd leaks across replacements.
TEST_F(VirtioBlockTest, RequestsInFlightEndOnTheOldFileAndNoFdLeaks) {
  open_device();
  const int before = count_open_fds();
  for (int i = 0; i < 3; ++i) {
    add_request(static_cast<uint16_t>(i), kBlkTypeIn, 0, 512);
    device_->notify(0);
    TempDisk next(kDiskSectors * 512);
    ASSERT_OK(device_->replace_disk(next.path()));
    ASSERT_TRUE(wait_used(static_cast<uint16_t>(i + 1)));
    EXPECT_EQ(memory_.read_obj<uint8_t>(status_gpa(static_cast<uint16_t>(i))).value(),
              kBlkStatusOk);
  }
  ASSERT_TRUE(drain());
  EXPECT_EQ(count_open_fds(), before);
}

TEST_F(VirtioBlockTest, CreateAndDestroyLeakNoFd) {
  const int before = count_open_fds();
  for (int i = 0; i < 3; ++i) {
    open_device();
    add_request(0, kBlkTypeIn, 0, 512);
    device_->notify(0);
    ASSERT_TRUE(drain());
    device_.reset();
  }
  EXPECT_EQ(count_open_fds(), before);
}

class VirtioBlockCreate : public VirtioBlockTest {
 protected:
  Error create_error(const std::string& path, BlockOptions options = {}) {
    auto created = VirtioBlock::create(path, options, memory_, *loop_);
    EXPECT_FALSE(created.has_value()) << path << " was accepted";
    return created ? Error() : created.error();
  }
};

TEST_F(VirtioBlockCreate, MissingFileIsNamed) {
  const Error e = create_error("/nonexistent/disk.img");
  EXPECT_THAT(e.message(), HasSubstr("/nonexistent/disk.img"));
  EXPECT_EQ(e.os_errno(), ENOENT);
}

TEST_F(VirtioBlockCreate, DirectoryIsNeitherAFileNorABlockDevice) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const Error e = create_error(dir, {.read_only = true, .id = {}});
  EXPECT_THAT(e.message(), HasSubstr("neither a regular file nor a block device"));
  EXPECT_THAT(e.message(), HasSubstr(dir));
}

TEST_F(VirtioBlockCreate, SizeNotAMultipleOf512IsRefused) {
  ASSERT_EQ(::truncate(disk_.path().c_str(), 1000), 0);
  const Error e = create_error(disk_.path());
  EXPECT_THAT(e.message(), HasSubstr(disk_.path()));
  EXPECT_THAT(e.message(), HasSubstr("1000 bytes, not a multiple of 512"));
  ASSERT_EQ(::truncate(disk_.path().c_str(), 0), 0);
  EXPECT_THAT(create_error(disk_.path()).message(), HasSubstr("empty"));
}

// The serial holds 20 bytes: a longer id (Firecracker's have no limit) gives its first 20.
TEST_F(VirtioBlockCreate, AnIdLongerThan20BytesIsTheSerialsFirst20) {
  ASSERT_OK_AND_ASSIGN(
      auto device,
      VirtioBlock::create(disk_.path(), {.id = "stubMFRGGZDFMZTWQ2LKNNWG23TP"}, memory_, *loop_));
  const std::string serial(device->state().id.begin(), device->state().id.end());
  EXPECT_EQ(serial, "stubMFRGGZDFMZTWQ2LK");
}

TEST_F(VirtioBlockCreate, DeviceStateDescribesTheDisk) {
  auto created =
      VirtioBlock::create(disk_.path(), {.read_only = true, .id = "abc"}, memory_, *loop_);
  ASSERT_OK(created);
  const BlockDeviceState& s = (*created)->state();
  EXPECT_EQ(s.capacity_sectors, kDiskSectors);
  EXPECT_TRUE(s.read_only);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.id.data()), 3), "abc");
  EXPECT_EQ(s.id[3], 0);
}

}  // namespace
}  // namespace dsec::virtio

// The I/O bus: mapping rules, dispatch with offsets, and what an access to nothing yields.
#include "vmm/devices/bus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/devices/legacy/boot_timer.h"
#include "vmm/devices/legacy/cmos.h"
#include "vmm/devices/legacy/i8042.h"
#include "vmm/devices/legacy/null_device.h"
#include "vmm/devices/legacy/serial.h"

namespace dsec::devices {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kTop = std::numeric_limits<uint64_t>::max();

// Records every access; a read returns base_value + offset + i in byte i.
class RecordingDevice final : public BusDevice {
 public:
  struct Access {
    bool is_write;
    uint64_t offset;
    std::vector<uint8_t> bytes;
    bool operator==(const Access&) const = default;
  };

  explicit RecordingDevice(uint8_t base_value = 0) : base_value_(base_value) {}

  void read(uint64_t offset, std::span<uint8_t> data) override {
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<uint8_t>(base_value_ + offset + i);
    }
    const std::lock_guard lock(mutex_);
    accesses_.push_back({false, offset, {data.begin(), data.end()}});
  }
  void write(uint64_t offset, std::span<const uint8_t> data) override {
    const std::lock_guard lock(mutex_);
    accesses_.push_back({true, offset, {data.begin(), data.end()}});
  }
  std::vector<Access> accesses() const {
    const std::lock_guard lock(mutex_);
    return accesses_;
  }

 private:
  const uint8_t base_value_;
  mutable std::mutex mutex_;
  std::vector<Access> accesses_;
};

TEST(Bus, DispatchesReadsAndWritesWithTheOffsetInsideTheRange) {
  Bus bus(AddressSpace::kMmio);
  auto device = std::make_shared<RecordingDevice>(0x40);
  ASSERT_OK(bus.insert({0xd000'0000, 0x1000}, device));

  std::array<uint8_t, 4> in{};
  EXPECT_TRUE(bus.read(0xd000'0010, in));
  EXPECT_THAT(in, ElementsAre(0x50, 0x51, 0x52, 0x53));

  const std::array<uint8_t, 2> out{0xab, 0xcd};
  EXPECT_TRUE(bus.write(0xd000'0ffe, out));  // the last two bytes of the range

  EXPECT_THAT(device->accesses(),
              ElementsAre(RecordingDevice::Access{false, 0x10, {0x50, 0x51, 0x52, 0x53}},
                          RecordingDevice::Access{true, 0xffe, {0xab, 0xcd}}));
}

TEST(Bus, EachRangeGoesToItsOwnDevice) {
  Bus bus(AddressSpace::kPio);
  auto low = std::make_shared<RecordingDevice>(0x00);
  auto high = std::make_shared<RecordingDevice>(0x80);
  ASSERT_OK(bus.insert({0x3f8, 8}, high));
  ASSERT_OK(bus.insert({0x2f8, 8}, low));  // inserted out of order on purpose

  std::array<uint8_t, 1> byte{};
  EXPECT_TRUE(bus.read(0x2fd, byte));
  EXPECT_EQ(byte[0], 0x05);
  EXPECT_TRUE(bus.read(0x3f9, byte));
  EXPECT_EQ(byte[0], 0x81);
  EXPECT_EQ(low->accesses().size(), 1u);
  EXPECT_EQ(high->accesses().size(), 1u);
}

TEST(Bus, OneDeviceAtTwoRangesSeesOffsetsOfEach) {
  Bus bus(AddressSpace::kPio);
  auto device = std::make_shared<RecordingDevice>();
  ASSERT_OK(bus.insert({0x3f8, 8}, device));
  ASSERT_OK(bus.insert({0x3e8, 8}, device));
  const std::array<uint8_t, 1> out{1};
  EXPECT_TRUE(bus.write(0x3ea, out));
  EXPECT_TRUE(bus.write(0x3fa, out));
  EXPECT_THAT(device->accesses(), ElementsAre(RecordingDevice::Access{true, 2, {1}},
                                              RecordingDevice::Access{true, 2, {1}}));
}

TEST(Bus, RejectsEveryKindOfOverlapAndNamesBothRanges) {
  Bus bus(AddressSpace::kPio);
  auto device = std::make_shared<RecordingDevice>();
  ASSERT_OK(bus.insert({0x3f8, 8}, device));

  const BusRange overlapping[] = {
      {0x3f8, 8},   // the same range
      {0x3f0, 9},   // ends on its first port
      {0x3ff, 1},   // its last port
      {0x3fa, 2},   // inside it
      {0x3f0, 32},  // around it
  };
  for (const BusRange range : overlapping) {
    const Status status = bus.insert(range, device);
    ASSERT_FALSE(status.has_value()) << "base " << range.base << " size " << range.size;
    EXPECT_THAT(
        status.error().message(),
        AllOf(HasSubstr("PIO"), HasSubstr("overlaps [0x3f8, 0x3ff]"), HasSubstr("already mapped")));
  }
  EXPECT_EQ(bus.range_count(), 1u);

  // Neighbours that touch it without overlapping are fine.
  ASSERT_OK(bus.insert({0x3f0, 8}, device));
  ASSERT_OK(bus.insert({0x400, 1}, device));
  EXPECT_EQ(bus.range_count(), 3u);
}

TEST(Bus, RejectsEmptyRangesMissingDevicesAndRangesPastTheAddressSpace) {
  auto device = std::make_shared<RecordingDevice>();
  Bus pio(AddressSpace::kPio);
  EXPECT_THAT(pio.insert({0x60, 0}, device).error().message(), HasSubstr("empty"));
  EXPECT_THAT(pio.insert({0x60, 1}, nullptr).error().message(), HasSubstr("no device"));
  const Status past_ports = pio.insert({0xffff, 2}, device);
  ASSERT_FALSE(past_ports.has_value());
  EXPECT_THAT(past_ports.error().message(),
              AllOf(HasSubstr("beyond the address space"), HasSubstr("0xffff")));
  EXPECT_FALSE(pio.insert({0x10000, 1}, device).has_value());
  ASSERT_OK(pio.insert({0xffff, 1}, device));  // the last port is a port

  Bus mmio(AddressSpace::kMmio);
  EXPECT_FALSE(mmio.insert({kTop, 2}, device).has_value());  // would wrap around
  EXPECT_FALSE(mmio.insert({2, kTop}, device).has_value());
  ASSERT_OK(mmio.insert({kTop - 0xfff, 0x1000}, device));  // ends at the very top
  EXPECT_EQ(mmio.range_count(), 1u);
}

TEST(Bus, AccessToNothingReadsAllOnesAndDropsWrites) {
  Bus bus(AddressSpace::kPio);
  auto device = std::make_shared<RecordingDevice>();
  ASSERT_OK(bus.insert({0x3f8, 8}, device));

  std::array<uint8_t, 4> in{1, 2, 3, 4};
  EXPECT_FALSE(bus.read(0x2f8, in));
  EXPECT_THAT(in, ElementsAre(0xff, 0xff, 0xff, 0xff));
  EXPECT_FALSE(bus.write(0x400, in));
  EXPECT_FALSE(bus.read(0x3f7, std::span(in).first(1)));  // just below the range
  EXPECT_FALSE(bus.read(0, std::span(in).first(1)));
  EXPECT_TRUE(device->accesses().empty());

  Bus empty(AddressSpace::kMmio);
  EXPECT_FALSE(empty.read(kTop, std::span(in).first(1)));
}

TEST(Bus, AccessCrossingARangeEndReachesNoDevice) {
  Bus bus(AddressSpace::kPio);
  auto serial = std::make_shared<RecordingDevice>();
  auto next = std::make_shared<RecordingDevice>();
  ASSERT_OK(bus.insert({0x3f8, 8}, serial));
  ASSERT_OK(bus.insert({0x400, 8}, next));

  std::array<uint8_t, 4> in{};
  EXPECT_FALSE(bus.read(0x3fe, in));  // 0x3fe-0x401 spans both devices
  EXPECT_THAT(in, ElementsAre(0xff, 0xff, 0xff, 0xff));
  EXPECT_FALSE(bus.write(0x3ff, std::span(in).first(2)));
  EXPECT_FALSE(bus.read(0x3f6, in));  // starts before the range
  EXPECT_TRUE(serial->accesses().empty());
  EXPECT_TRUE(next->accesses().empty());
}

TEST(Bus, AccessesAtTheTopOfTheAddressSpaceDoNotWrapAround) {
  Bus bus(AddressSpace::kMmio);
  auto top = std::make_shared<RecordingDevice>();
  auto bottom = std::make_shared<RecordingDevice>();
  ASSERT_OK(bus.insert({kTop - 7, 8}, top));
  ASSERT_OK(bus.insert({0, 8}, bottom));

  std::array<uint8_t, 16> in{};
  EXPECT_TRUE(bus.read(kTop - 7, std::span(in).first(8)));
  EXPECT_TRUE(bus.read(kTop, std::span(in).first(1)));
  EXPECT_FALSE(bus.read(kTop - 7, in));  // would end past 2^64
  EXPECT_FALSE(bus.read(kTop, std::span(in).first(2)));
  EXPECT_EQ(top->accesses().size(), 2u);
  EXPECT_TRUE(bottom->accesses().empty());
}

TEST(Bus, EmptyAccessReachesNoDevice) {
  Bus bus(AddressSpace::kPio);
  auto device = std::make_shared<RecordingDevice>();
  ASSERT_OK(bus.insert({0x60, 5}, device));
  EXPECT_FALSE(bus.read(0x60, std::span<uint8_t>()));
  EXPECT_FALSE(bus.write(0x60, std::span<const uint8_t>()));
  EXPECT_TRUE(device->accesses().empty());
}

// A stateless device for the concurrency test: byte i of a read is the low byte of
// tag + offset + i, and it counts its calls.
class CountingDevice final : public BusDevice {
 public:
  explicit CountingDevice(uint8_t tag) : tag_(tag) {}
  void read(uint64_t offset, std::span<uint8_t> data) override {
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<uint8_t>(tag_ + offset + i);
    }
    calls.fetch_add(1, std::memory_order_relaxed);
  }
  void write(uint64_t /*offset*/, std::span<const uint8_t> /*data*/) override {
    calls.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> calls{0};

 private:
  const uint8_t tag_;
};

TEST(Bus, ConcurrentVcpuThreadsEachReachTheRightDevice) {
  constexpr int kDevices = 16;
  constexpr int kThreads = 8;
  constexpr int kAccessesPerThread = 20000;
  Bus bus(AddressSpace::kMmio);
  std::vector<std::shared_ptr<CountingDevice>> devices;
  devices.reserve(kDevices);
  for (int d = 0; d < kDevices; ++d) {
    devices.push_back(std::make_shared<CountingDevice>(static_cast<uint8_t>(d * 16)));
    ASSERT_OK(bus.insert({0xd000'0000 + static_cast<uint64_t>(d) * 0x1000, 0x1000}, devices[d]));
  }
  const Bus& shared = bus;  // what vCPU threads get

  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&shared, &wrong, t] {
      std::array<uint8_t, 4> in{};
      for (int i = 0; i < kAccessesPerThread; ++i) {
        const int d = (i + t) % kDevices;
        const uint64_t offset = static_cast<uint64_t>((i * 4) % 0x1000);
        if (!shared.read(0xd000'0000 + static_cast<uint64_t>(d) * 0x1000 + offset, in) ||
            in[0] != static_cast<uint8_t>(static_cast<uint64_t>(d) * 16 + offset)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  uint64_t total = 0;
  for (const auto& device : devices) {
    total += device->calls.load();
  }
  EXPECT_EQ(total, static_cast<uint64_t>(kThreads) * kAccessesPerThread);
}

// The legacy PC devices at their conventional ports fit on one PIO bus without overlap.
TEST(Bus, LegacyPcPortLayoutHasNoOverlaps) {
  Bus bus(AddressSpace::kPio);
  ASSERT_OK(
      bus.insert({kCom1Port, kSerialRegisterCount}, std::make_shared<Serial>(nullptr, nullptr)));
  ASSERT_OK(bus.insert({kI8042Port, kI8042RegisterCount}, std::make_shared<I8042>(nullptr)));
  ASSERT_OK(bus.insert({kCmosPort, kCmosRegisterCount}, std::make_shared<Cmos>()));
  ASSERT_OK(bus.insert({kPostCodePort, 1}, std::make_shared<NullDevice>()));
  ASSERT_OK(bus.insert({kBootTimerPort, kBootTimerRegisterCount},
                       std::make_shared<BootTimer>(BootTimer::Clock::now())));
  std::array<uint8_t, 1> lsr{};
  EXPECT_TRUE(bus.read(kCom1Port + 5, lsr));
  EXPECT_EQ(lsr[0], 0x60);  // THRE | TEMT
}

}  // namespace
}  // namespace dsec::devices

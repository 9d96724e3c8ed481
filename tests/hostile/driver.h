// A virtio-mmio driver written as hostile-guest script (script.h): the ops a guest
// driver would run to reset, negotiate with and set up a device, build descriptor chains
// and publish them, notify and wait for the used ring. The host test keeps the driver's
// side of each queue (its avail and used indices) here, as the script is fixed before the
// guest runs it. Register offsets and layouts are the spec's (virtio 1.2, 4.2.2 and 2.7),
// not the code under test's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tests/hostile/script.h"

namespace dsec::test::hostile {

// The guest's RAM and where the driver keeps each device's rings and buffers in it.
inline constexpr uint64_t kRamBytes = 64ULL << 20;
inline constexpr uint64_t kDeviceAreaBase = 32ULL << 20;
inline constexpr uint64_t kDeviceAreaSize = 2ULL << 20;
inline constexpr uint64_t kQueueAreaSize = 0x4000;  // desc, avail, used: 4 KiB each, then spare
inline constexpr uint64_t kBufferAreaOffset = 1ULL << 20;  // past the rings of every queue
inline constexpr uint64_t kBufferAreaSize = 0x20000;       // per queue
// virtio-mmio slot i: 4 KiB at 3 GiB + 4 KiB * i (dsec-vmm's layout, docs/architecture.md).
inline constexpr uint64_t kMmioBase = 3ULL << 30;

// Registers (4.2.2).
namespace reg {
inline constexpr uint64_t kMagic = 0x000;
inline constexpr uint64_t kVersion = 0x004;
inline constexpr uint64_t kDeviceId = 0x008;
inline constexpr uint64_t kDeviceFeatures = 0x010;
inline constexpr uint64_t kDeviceFeaturesSel = 0x014;
inline constexpr uint64_t kDriverFeatures = 0x020;
inline constexpr uint64_t kDriverFeaturesSel = 0x024;
inline constexpr uint64_t kQueueSel = 0x030;
inline constexpr uint64_t kQueueNumMax = 0x034;
inline constexpr uint64_t kQueueNum = 0x038;
inline constexpr uint64_t kQueueReady = 0x044;
inline constexpr uint64_t kQueueNotify = 0x050;
inline constexpr uint64_t kInterruptStatus = 0x060;
inline constexpr uint64_t kInterruptAck = 0x064;
inline constexpr uint64_t kStatus = 0x070;
inline constexpr uint64_t kQueueDescLow = 0x080;
inline constexpr uint64_t kQueueDescHigh = 0x084;
inline constexpr uint64_t kQueueDriverLow = 0x090;
inline constexpr uint64_t kQueueDriverHigh = 0x094;
inline constexpr uint64_t kQueueDeviceLow = 0x0a0;
inline constexpr uint64_t kQueueDeviceHigh = 0x0a4;
inline constexpr uint64_t kConfigGeneration = 0x0fc;
inline constexpr uint64_t kConfig = 0x100;
}  // namespace reg

// Device status bits (2.1).
inline constexpr uint32_t kAcknowledge = 1;
inline constexpr uint32_t kDriver = 2;
inline constexpr uint32_t kDriverOk = 4;
inline constexpr uint32_t kFeaturesOk = 8;
inline constexpr uint32_t kNeedsReset = 0x40;
inline constexpr uint32_t kFailed = 0x80;

// Feature bits (6).
inline constexpr uint64_t kIndirectDesc = 1ULL << 28;
inline constexpr uint64_t kEventIdx = 1ULL << 29;
inline constexpr uint64_t kVersion1 = 1ULL << 32;

// Descriptor flags (2.7.5).
inline constexpr uint16_t kNext = 1;
inline constexpr uint16_t kWrite = 2;
inline constexpr uint16_t kIndirect = 4;

struct QueueArea {
  uint16_t size = 16;
  uint64_t desc = 0;
  uint64_t avail = 0;
  uint64_t used = 0;
  uint64_t spare = 0;    // 4 KiB after the rings: indirect tables
  uint64_t buffers = 0;  // kBufferAreaSize bytes of buffers
  // The driver's side: the avail idx it published, the used idx it has seen.
  uint16_t avail_idx = 0;
  uint16_t used_idx = 0;
};

class Driver {
 public:
  Driver(Script& script, uint32_t slot, uint32_t device_id, uint32_t queue_count)
      : script_(script), slot_(slot), device_id_(device_id) {
    const uint64_t area = kDeviceAreaBase + slot * kDeviceAreaSize;
    for (uint32_t q = 0; q < queue_count; ++q) {
      QueueArea a;
      a.desc = area + q * kQueueAreaSize;
      a.avail = a.desc + 0x1000;
      a.used = a.desc + 0x2000;
      a.spare = a.desc + 0x3000;
      a.buffers = area + kBufferAreaOffset + q * kBufferAreaSize;
      queues_.push_back(a);
    }
  }

  Script& script() { return script_; }
  uint32_t slot() const { return slot_; }
  uint64_t reg(uint64_t offset) const { return kMmioBase + slot_ * 0x1000 + offset; }
  QueueArea& queue(uint16_t q) { return queues_.at(q); }
  size_t queue_count() const { return queues_.size(); }

  // --- Registers
  void write_reg(uint64_t offset, uint32_t value) { script_.write(reg(offset), value); }
  void expect_reg(uint64_t offset, uint32_t value, uint32_t mask = 0xffffffff) {
    script_.expect(reg(offset), value, 4, mask);
  }
  void expect_status(uint32_t value) { expect_reg(reg::kStatus, value); }

  // Status 0, which the device must show at once: then the driver's rings and buffers are
  // zeroed and its indices start again.
  void reset() {
    write_reg(reg::kStatus, 0);
    expect_status(0);
    expect_reg(reg::kInterruptStatus, 0);
    for (QueueArea& a : queues_) {
      script_.fill(a.desc, 0, 0x4000);
      script_.fill(a.buffers, 0, kBufferAreaSize);
      a.avail_idx = 0;
      a.used_idx = 0;
    }
  }
  // Reset, then ACKNOWLEDGE, DRIVER and `features` up to FEATURES_OK, which must stick.
  void negotiate(uint64_t features) {
    reset();
    expect_reg(reg::kMagic, 0x74726976);
    expect_reg(reg::kVersion, 2);
    expect_reg(reg::kDeviceId, device_id_);
    write_reg(reg::kStatus, kAcknowledge);
    write_reg(reg::kStatus, kAcknowledge | kDriver);
    write_features(features);
    write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk);
    expect_status(kAcknowledge | kDriver | kFeaturesOk);
  }
  void write_features(uint64_t features) {
    write_reg(reg::kDriverFeaturesSel, 0);
    write_reg(reg::kDriverFeatures, static_cast<uint32_t>(features));
    write_reg(reg::kDriverFeaturesSel, 1);
    write_reg(reg::kDriverFeatures, static_cast<uint32_t>(features >> 32));
  }
  // Selects q and writes its size and ring addresses (the driver's layout), then ready.
  void setup_queue(uint16_t q) {
    const QueueArea& a = queues_.at(q);
    select(q);
    write_reg(reg::kQueueNum, a.size);
    write_ring_addresses(a.desc, a.avail, a.used);
    write_reg(reg::kQueueReady, 1);
  }
  void select(uint32_t q) { write_reg(reg::kQueueSel, q); }
  void write_ring_addresses(uint64_t desc, uint64_t avail, uint64_t used) {
    write_reg(reg::kQueueDescLow, static_cast<uint32_t>(desc));
    write_reg(reg::kQueueDescHigh, static_cast<uint32_t>(desc >> 32));
    write_reg(reg::kQueueDriverLow, static_cast<uint32_t>(avail));
    write_reg(reg::kQueueDriverHigh, static_cast<uint32_t>(avail >> 32));
    write_reg(reg::kQueueDeviceLow, static_cast<uint32_t>(used));
    write_reg(reg::kQueueDeviceHigh, static_cast<uint32_t>(used >> 32));
  }
  void driver_ok() { write_reg(reg::kStatus, kAcknowledge | kDriver | kFeaturesOk | kDriverOk); }
  // The whole initialization (3.1.1) with every queue; the device must come up live.
  void init(uint64_t features = kVersion1 | kIndirectDesc) {
    negotiate(features);
    for (uint16_t q = 0; q < queues_.size(); ++q) setup_queue(q);
    driver_ok();
    expect_status(kAcknowledge | kDriver | kFeaturesOk | kDriverOk);
  }
  // The device gave up on a queue the driver broke: it shows DEVICE_NEEDS_RESET.
  void wait_needs_reset() { script_.wait(reg(reg::kStatus), kNeedsReset, 4, kNeedsReset); }

  // --- Rings
  void desc_in(uint64_t table, uint32_t index, uint64_t addr, uint32_t len, uint16_t flags,
               uint16_t next = 0) {
    const uint64_t at = table + 16 * uint64_t{index};
    script_.write(at, addr, 8);
    script_.write(at + 8, uint64_t{len} | uint64_t{flags} << 32 | uint64_t{next} << 48, 8);
  }
  void desc(uint16_t q, uint32_t index, uint64_t addr, uint32_t len, uint16_t flags,
            uint16_t next = 0) {
    desc_in(queues_.at(q).desc, index, addr, len, flags, next);
  }
  // The next avail ring entry names `head`, and idx moves past it.
  void publish(uint16_t q, uint16_t head) {
    QueueArea& a = queues_.at(q);
    script_.write(a.avail + 4 + 2 * uint64_t(a.avail_idx % a.size), head, 2);
    set_avail_idx(q, static_cast<uint16_t>(a.avail_idx + 1));
  }
  void set_avail_idx(uint16_t q, uint16_t idx) {
    QueueArea& a = queues_.at(q);
    a.avail_idx = idx;
    script_.write(a.avail + 2, idx, 2);
  }
  void notify(uint16_t q) { write_reg(reg::kQueueNotify, q); }
  // Buffer i of `size` bytes in q's buffer area.
  uint64_t buffer(uint16_t q, uint32_t i, uint32_t size) {
    return queues_.at(q).buffers + uint64_t{i} * size;
  }
  // `count` device-writable buffers of `size` bytes at heads 0..count-1, then a notify.
  void post_writable(uint16_t q, uint16_t count, uint32_t size) {
    for (uint16_t i = 0; i < count; ++i) {
      desc(q, i, buffer(q, i, size), size, kWrite);
      publish(q, i);
    }
    notify(q);
  }
  // `bytes` as one device-readable buffer at head 0 of q; the device must return it
  // unwritten.
  void send_readable(uint16_t q, std::span<const uint8_t> bytes) {
    const uint64_t buf = queues_.at(q).buffers;
    script_.copy(buf, bytes);
    desc(q, 0, buf, static_cast<uint32_t>(bytes.size()), 0);
    publish(q, 0);
    notify(q);
    wait_used(q);
    expect_last_used(q, 0, 0);
  }
  // Waits for the device to return `count` more chains on q.
  void wait_used(uint16_t q, uint16_t count = 1) {
    QueueArea& a = queues_.at(q);
    a.used_idx = static_cast<uint16_t>(a.used_idx + count);
    script_.wait(a.used + 2, a.used_idx, 2);
  }
  // The used idx has not moved (after a delay the caller gave the device).
  void expect_no_used(uint16_t q) {
    script_.expect(queues_.at(q).used + 2, queues_.at(q).used_idx, 2);
  }
  // Used ring entry `n` (counted from the start: n-th chain returned) holds id and len.
  void expect_used_elem(uint16_t q, uint16_t n, uint32_t id, uint32_t len) {
    const QueueArea& a = queues_.at(q);
    script_.expect(a.used + 4 + 8 * uint64_t(n % a.size), uint64_t{id} | uint64_t{len} << 32, 8);
  }
  // The last chain returned on q.
  void expect_last_used(uint16_t q, uint32_t id, uint32_t len) {
    expect_used_elem(q, static_cast<uint16_t>(queues_.at(q).used_idx - 1), id, len);
  }
  // A used-buffer interrupt is pending; acknowledged here.
  void expect_used_interrupt() {
    expect_reg(reg::kInterruptStatus, 1, 1);
    write_reg(reg::kInterruptAck, 1);
  }

 private:
  Script& script_;
  uint32_t slot_;
  uint32_t device_id_;
  std::vector<QueueArea> queues_;
};

}  // namespace dsec::test::hostile

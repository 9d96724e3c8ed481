// Constants and wire layouts from the virtio 1.x specification (OASIS virtio v1.2) that
// every transport and device shares. Section numbers refer to that document.
#pragma once

#include <bit>
#include <cstdint>

namespace dsec::virtio {

// The rings are little-endian in a modern (VIRTIO_F_VERSION_1) device, and read here with
// plain loads: this code only builds for little-endian hosts.
static_assert(std::endian::native == std::endian::little, "virtio rings are little-endian");

// Device status bits (2.1).
inline constexpr uint32_t kStatusAcknowledge = 0x01;
inline constexpr uint32_t kStatusDriver = 0x02;
inline constexpr uint32_t kStatusDriverOk = 0x04;
inline constexpr uint32_t kStatusFeaturesOk = 0x08;
inline constexpr uint32_t kStatusDeviceNeedsReset = 0x40;
inline constexpr uint32_t kStatusFailed = 0x80;

// Feature bit numbers (6, "Reserved Feature Bits"). As masks: feature_bit(n).
inline constexpr unsigned kFeatureIndirectDesc = 28;
inline constexpr unsigned kFeatureEventIdx = 29;
inline constexpr unsigned kFeatureVersion1 = 32;
constexpr uint64_t feature_bit(unsigned bit) {
  return uint64_t{1} << bit;
}

// Device IDs (5) used by dsec-vmm.
inline constexpr uint32_t kDeviceIdNet = 1;
inline constexpr uint32_t kDeviceIdBlock = 2;
inline constexpr uint32_t kDeviceIdEntropy = 4;
inline constexpr uint32_t kDeviceIdBalloon = 5;
inline constexpr uint32_t kDeviceIdVsock = 19;

// Split virtqueues (2.7).
// The largest queue size a split virtqueue may have.
inline constexpr uint16_t kMaxQueueSize = 32768;

// struct virtq_desc (2.7.5): 16 bytes, 16-byte aligned table.
struct VirtqDesc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags;
  uint16_t next;
};
static_assert(sizeof(VirtqDesc) == 16);
inline constexpr uint16_t kDescFlagNext = 0x1;
inline constexpr uint16_t kDescFlagWrite = 0x2;
inline constexpr uint16_t kDescFlagIndirect = 0x4;

// struct virtq_used_elem (2.7.8).
struct VirtqUsedElem {
  uint32_t id;
  uint32_t len;
};
static_assert(sizeof(VirtqUsedElem) == 8);

// struct virtq_avail (2.7.6): le16 flags; le16 idx; le16 ring[size]; le16 used_event.
inline constexpr uint64_t kAvailFlagsOffset = 0;
inline constexpr uint64_t kAvailIdxOffset = 2;
inline constexpr uint64_t kAvailRingOffset = 4;
inline constexpr uint16_t kAvailFlagNoInterrupt = 0x1;
// struct virtq_used (2.7.8): le16 flags; le16 idx; virtq_used_elem ring[size]; le16 avail_event.
inline constexpr uint64_t kUsedFlagsOffset = 0;
inline constexpr uint64_t kUsedIdxOffset = 2;
inline constexpr uint64_t kUsedRingOffset = 4;

// Sizes and alignments of the three parts of a queue of `size` entries (2.7, table
// "Virtqueue Part Alignment and Size"). The event fields are counted whether or not
// VIRTIO_F_EVENT_IDX is negotiated, as drivers always allocate them.
constexpr uint64_t desc_table_bytes(uint64_t size) {
  return 16 * size;
}
constexpr uint64_t avail_ring_bytes(uint64_t size) {
  return 6 + 2 * size;
}
constexpr uint64_t used_ring_bytes(uint64_t size) {
  return 6 + 8 * size;
}
inline constexpr uint64_t kDescTableAlign = 16;
inline constexpr uint64_t kAvailRingAlign = 2;
inline constexpr uint64_t kUsedRingAlign = 4;

}  // namespace dsec::virtio

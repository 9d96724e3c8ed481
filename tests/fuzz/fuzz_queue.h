// What the device fuzz targets share to hand a device its queues: a queue reset and made
// ready on rings the fuzzer's bytes fill, as the transport leaves it when the driver sets
// DRIVER_OK.
#pragma once

#include <cstdint>

#include "vmm/devices/virtio/queue.h"

namespace dsec::fuzz {

struct QueueRings {
  uint16_t size = 0;
  uint64_t desc = 0;
  uint64_t avail = 0;
  uint64_t used = 0;
};

// Resets `queue` and readies it on `rings`, with the features the fuzzer chose.
inline void ready_queue(virtio::VirtQueue& queue, const QueueRings& rings, bool event_idx,
                        bool indirect) {
  queue.reset();
  virtio::QueueState& s = queue.state();
  s.size = rings.size;
  s.desc_table = rings.desc;
  s.avail_ring = rings.avail;
  s.used_ring = rings.used;
  s.event_idx = event_idx;
  s.indirect_desc = indirect;
  s.ready = true;
}

}  // namespace dsec::fuzz

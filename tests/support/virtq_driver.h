// The guest driver's side of a split virtqueue, for tests: writes descriptors and the
// available ring and reads the used ring the way a guest would. Offsets come from the
// spec's struct layouts (virtio 1.2, 2.7), not from the code under test.
#pragma once

#include <cstdint>

#include "vmm/devices/virtio/queue.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio::testing {

inline constexpr uint16_t kNext = 1;      // VIRTQ_DESC_F_NEXT
inline constexpr uint16_t kWrite = 2;     // VIRTQ_DESC_F_WRITE
inline constexpr uint16_t kIndirect = 4;  // VIRTQ_DESC_F_INDIRECT

struct QueueLayout {
  uint16_t size = 8;
  uint64_t desc = 0x1000;
  uint64_t avail = 0x2000;
  uint64_t used = 0x3000;
};

class DriverQueue {
 public:
  // Accessors throw (std::bad_expected_access) if the layout is outside `memory`, which
  // fails the test that used them.
  DriverQueue(GuestMemory& memory, QueueLayout layout) : memory_(memory), layout_(layout) {}

  const QueueLayout& layout() const { return layout_; }

  // The configuration a transport would hand the device for this layout.
  QueueState queue_state(bool event_idx = false, bool indirect = false) const {
    QueueState s;
    s.size = layout_.size;
    s.ready = true;
    s.desc_table = layout_.desc;
    s.avail_ring = layout_.avail;
    s.used_ring = layout_.used;
    s.event_idx = event_idx;
    s.indirect_desc = indirect;
    return s;
  }

  // Writes descriptor `index` of the table at `table` (the queue's by default).
  void set_desc(uint16_t index, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next = 0) {
    set_desc_in(layout_.desc, index, addr, len, flags, next);
  }
  void set_desc_in(uint64_t table, uint32_t index, uint64_t addr, uint32_t len, uint16_t flags,
                   uint16_t next = 0) {
    const uint64_t at = table + 16 * uint64_t{index};
    memory_.write_obj<uint64_t>(at, addr).value();
    memory_.write_obj<uint32_t>(at + 8, len).value();
    memory_.write_obj<uint16_t>(at + 12, flags).value();
    memory_.write_obj<uint16_t>(at + 14, next).value();
  }

  // Puts `head` in the next available ring entry and moves idx past it.
  void publish(uint16_t head) {
    const uint16_t idx = avail_idx();
    memory_.write_obj<uint16_t>(layout_.avail + 4 + 2 * uint64_t(idx % layout_.size), head).value();
    set_avail_idx(static_cast<uint16_t>(idx + 1));
  }
  uint16_t avail_idx() const { return memory_.read_obj<uint16_t>(layout_.avail + 2).value(); }
  void set_avail_idx(uint16_t idx) { memory_.write_obj<uint16_t>(layout_.avail + 2, idx).value(); }
  void set_avail_flags(uint16_t flags) {
    memory_.write_obj<uint16_t>(layout_.avail, flags).value();
  }
  void set_used_event(uint16_t event) {
    memory_.write_obj<uint16_t>(layout_.avail + 4 + 2 * uint64_t{layout_.size}, event).value();
  }

  uint16_t used_idx() const { return memory_.read_obj<uint16_t>(layout_.used + 2).value(); }
  struct UsedElem {
    uint32_t id;
    uint32_t len;
    bool operator==(const UsedElem&) const = default;
  };
  UsedElem used_elem(uint16_t slot) const {
    const uint64_t at = layout_.used + 4 + 8 * uint64_t(slot % layout_.size);
    return {memory_.read_obj<uint32_t>(at).value(), memory_.read_obj<uint32_t>(at + 4).value()};
  }
  uint16_t avail_event() const {
    return memory_.read_obj<uint16_t>(layout_.used + 4 + 8 * uint64_t{layout_.size}).value();
  }

 private:
  GuestMemory& memory_;
  QueueLayout layout_;
};

}  // namespace dsec::virtio::testing

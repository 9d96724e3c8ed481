// The device side of a split virtqueue (virtio 1.2, 2.7). Every byte the driver wrote
// (ring indices, descriptor indices, addresses, lengths) is treated as hostile: a bad one
// yields an Error, never a crash, a hang or an access outside guest memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/descriptor_chain.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// Everything a queue is, as plain data that a snapshot saves and restores as it is. The
// transport fills in the driver's configuration (size, addresses, ready) and the
// negotiated features; the indices and the notification bookkeeping move as the device
// works.
struct QueueState {
  uint16_t size = 0;  // the driver's choice; valid when a power of two <= the queue's maximum
  bool ready = false;
  uint64_t desc_table = 0;
  uint64_t avail_ring = 0;     // "driver area"
  uint64_t used_ring = 0;      // "device area"
  uint16_t next_avail = 0;     // the next avail ring entry the device will take
  uint16_t next_used = 0;      // the used idx the device last published
  bool event_idx = false;      // VIRTIO_F_EVENT_IDX negotiated
  bool indirect_desc = false;  // VIRTIO_F_INDIRECT_DESC negotiated
  // next_used when the driver was last notified (EVENT_IDX); invalid after a reset or a
  // restore, which makes the next check notify.
  uint16_t signalled_used = 0;
  bool signalled_used_valid = false;
  // Set at the first bad avail idx or bad chain; the queue then refuses all work until
  // the device is reset.
  bool broken = false;

  bool operator==(const QueueState&) const = default;
};

// True if a driver whose used_event is `event` wants a notification now that the used
// idx moved from `old_idx` to `new_idx` (2.7.10, vring_need_event in the spec's
// virtio_ring.h): `event` is in [old_idx, new_idx), counted modulo 2^16.
constexpr bool vring_need_event(uint16_t event, uint16_t new_idx, uint16_t old_idx) {
  return static_cast<uint16_t>(new_idx - event - 1) < static_cast<uint16_t>(new_idx - old_idx);
}

class VirtQueue {
 public:
  // max_size is the device's QueueNumMax: a power of two in [1, kMaxQueueSize].
  static Result<VirtQueue> create(uint16_t max_size);

  uint16_t max_size() const { return max_size_; }

  // The queue's state. The transport writes the configuration fields while the device is
  // not live; a snapshot reads it all while the device is paused.
  QueueState& state() { return state_; }
  const QueueState& state() const { return state_; }

  // Back to the state after a device reset: not ready, size = max_size, all else zero.
  void reset();

  // Checks the driver's configuration before the device goes live: the size is a power of
  // two no larger than max_size, and each ring is aligned and wholly inside one guest RAM
  // region.
  Status validate(const GuestMemory& memory) const;

  // The next available chain, or nullopt if the driver has published none. An avail idx
  // more than `size` ahead of the device, or a malformed chain, breaks the queue: this
  // returns an Error now and on every later call, and the device should report
  // DEVICE_NEEDS_RESET. With VIRTIO_F_EVENT_IDX, finding the ring empty publishes
  // avail_event, so that the driver notifies for the next buffer it adds: a device only has
  // to pop until nullopt, and wait for the next notification.
  Result<std::optional<DescriptorChain>> pop(GuestMemory& memory);

  // Puts back the chain the last pop() returned, so that the next pop() returns it again:
  // for a device that cannot take it yet (its rate limiter is out of tokens). Only right
  // after a pop() that returned a chain.
  void undo_pop() { --state_.next_avail; }

  // The avail idx the driver last published (bounds-checked read of its ring).
  Result<uint16_t> driver_avail_idx(const GuestMemory& memory) const {
    return read_avail_idx(memory);
  }

  // Returns chain `head` to the driver with `len` bytes written to its writable buffers.
  Status add_used(GuestMemory& memory, uint16_t head, uint32_t len);

  // Whether the driver wants a used-buffer notification for what add_used() published
  // since the last call: with EVENT_IDX, according to used_event; otherwise, unless the
  // driver set VIRTQ_AVAIL_F_NO_INTERRUPT. An Error means the rings cannot be read; the
  // device may notify anyway.
  Result<bool> needs_notification(const GuestMemory& memory);

  // One line for a person looking at a stuck device: the device's indices beside what the
  // driver last wrote in the rings (its avail idx, and with EVENT_IDX its used_event and
  // our avail_event), read with bounds checks, so a ring the driver broke shows as such.
  std::string describe(const GuestMemory& memory) const;

 private:
  explicit VirtQueue(uint16_t max_size);

  Status check_usable() const;
  // Where EVENT_IDX's fields sit: the driver's used_event after the avail ring, the
  // device's avail_event after the used ring (2.7.10).
  uint64_t used_event_addr() const;
  uint64_t avail_event_addr() const;
  Result<uint16_t> read_avail_idx(const GuestMemory& memory) const;
  Status publish_avail_event(GuestMemory& memory) const;
  // Marks the queue broken and returns the error, with the queue's context.
  std::unexpected<Error> break_queue(const Error& error);

  uint16_t max_size_;
  QueueState state_;
};

}  // namespace dsec::virtio

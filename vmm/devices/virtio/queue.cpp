#include "vmm/devices/virtio/queue.h"

#include <fmt/format.h>

#include <atomic>
#include <bit>

#include "vmm/devices/virtio/virtio_spec.h"

namespace dsec::virtio {
namespace {

bool valid_size(uint32_t size, uint32_t max) {
  return size != 0 && size <= max && std::has_single_bit(size);
}

Status check_ring(const GuestMemory& memory, const char* name, uint64_t addr, uint64_t len,
                  uint64_t align) {
  if (addr % align != 0) {
    return fail(fmt::format("{} at {:#x} is not {}-byte aligned", name, addr, align));
  }
  if (!memory.contains(addr, len)) {
    return fail(fmt::format("{} [{:#x}, +{:#x}) is not inside guest RAM", name, addr, len));
  }
  return ok();
}

}  // namespace

Result<VirtQueue> VirtQueue::create(uint16_t max_size) {
  if (!valid_size(max_size, kMaxQueueSize)) {
    return fail(fmt::format("virtqueue maximum size {} is not a power of two in [1, {}]", max_size,
                            kMaxQueueSize));
  }
  return VirtQueue(max_size);
}

VirtQueue::VirtQueue(uint16_t max_size) : max_size_(max_size) {
  reset();
}

void VirtQueue::reset() {
  state_ = QueueState{};
  state_.size = max_size_;
}

Status VirtQueue::validate(const GuestMemory& memory) const {
  const QueueState& s = state_;
  if (!valid_size(s.size, max_size_)) {
    return fail(fmt::format("queue size {} is not a power of two in [1, {}]", s.size, max_size_));
  }
  DSEC_TRY(check_ring(memory, "descriptor table", s.desc_table, desc_table_bytes(s.size),
                      kDescTableAlign));
  DSEC_TRY(check_ring(memory, "available ring", s.avail_ring, avail_ring_bytes(s.size),
                      kAvailRingAlign));
  DSEC_TRY(check_ring(memory, "used ring", s.used_ring, used_ring_bytes(s.size), kUsedRingAlign));
  return ok();
}

Status VirtQueue::check_usable() const {
  if (state_.broken) {
    return fail("the queue is broken by an earlier error; it works again after a device reset");
  }
  if (!state_.ready) {
    return fail("the queue is not ready");
  }
  // The configuration is validated when the device goes live, but the state is plain data
  // (a restored snapshot, say): never index a ring with a size that is not a power of two.
  if (!valid_size(state_.size, max_size_)) {
    return fail(
        fmt::format("queue size {} is not a power of two in [1, {}]", state_.size, max_size_));
  }
  return ok();
}

std::unexpected<Error> VirtQueue::break_queue(const Error& error) {
  state_.broken = true;
  return std::unexpected(error.with_context("virtqueue"));
}

uint64_t VirtQueue::used_event_addr() const {
  return state_.avail_ring + avail_ring_bytes(state_.size) - 2;
}

uint64_t VirtQueue::avail_event_addr() const {
  return state_.used_ring + used_ring_bytes(state_.size) - 2;
}

Result<uint16_t> VirtQueue::read_avail_idx(const GuestMemory& memory) const {
  const uint16_t idx = DSEC_TRY(memory.read_obj<uint16_t>(state_.avail_ring + kAvailIdxOffset));
  // The driver writes ring entries before idx (with a write barrier); read them only after
  // idx (2.7.13.3).
  std::atomic_thread_fence(std::memory_order_acquire);
  return idx;
}

Status VirtQueue::publish_avail_event(GuestMemory& memory) const {
  DSEC_TRY(memory.write_obj<uint16_t>(avail_event_addr(), state_.next_avail));
  // The driver must see avail_event before we read avail idx again, or it may skip a
  // notification we then never get (the store-load order needs a full fence).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return ok();
}

Result<std::optional<DescriptorChain>> VirtQueue::pop(GuestMemory& memory) {
  if (auto usable = check_usable(); !usable) {
    return std::unexpected(usable.error().with_context("virtqueue"));
  }
  auto avail_idx = read_avail_idx(memory);
  if (!avail_idx) {
    return break_queue(avail_idx.error());
  }
  if (*avail_idx == state_.next_avail && state_.event_idx) {
    if (auto published = publish_avail_event(memory); !published) {
      return break_queue(published.error());
    }
    avail_idx = read_avail_idx(memory);
    if (!avail_idx) {
      return break_queue(avail_idx.error());
    }
  }
  const uint16_t pending = *avail_idx - state_.next_avail;
  if (pending == 0) {
    return std::nullopt;
  }
  if (pending > state_.size) {
    return break_queue(Error(fmt::format(
        "available idx {} is {} entries ahead of the device's {}, more than the queue size {}",
        *avail_idx, pending, state_.next_avail, state_.size)));
  }

  const uint64_t slot = state_.next_avail & (state_.size - 1);
  auto head = memory.read_obj<uint16_t>(state_.avail_ring + kAvailRingOffset + 2 * slot);
  if (!head) {
    return break_queue(head.error());
  }
  auto chain = read_descriptor_chain(
      memory,
      {.address = state_.desc_table, .size = state_.size, .indirect_allowed = state_.indirect_desc},
      *head);
  if (!chain) {
    return break_queue(chain.error());
  }
  ++state_.next_avail;
  return std::move(*chain);
}

Status VirtQueue::add_used(GuestMemory& memory, uint16_t head, uint32_t len) {
  DSEC_TRY(check_usable());
  if (head >= state_.size) {
    return fail(
        fmt::format("virtqueue: used head {} is outside the queue of {}", head, state_.size));
  }
  const uint64_t slot = state_.next_used & (state_.size - 1);
  DSEC_TRY(memory.write_obj(state_.used_ring + kUsedRingOffset + sizeof(VirtqUsedElem) * slot,
                            VirtqUsedElem{head, len}));
  // The driver reads the element after it sees the new idx: write them in that order.
  std::atomic_thread_fence(std::memory_order_release);
  const uint16_t next_used = state_.next_used + 1;
  DSEC_TRY(memory.write_obj<uint16_t>(state_.used_ring + kUsedIdxOffset, next_used));
  state_.next_used = next_used;
  return ok();
}

Result<bool> VirtQueue::needs_notification(const GuestMemory& memory) {
  DSEC_TRY(check_usable());
  // The used idx we wrote must be visible before we read the driver's suppression fields;
  // otherwise we may read a stale "don't notify" while the driver reads our stale idx.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!state_.event_idx) {
    const uint16_t flags =
        DSEC_TRY(memory.read_obj<uint16_t>(state_.avail_ring + kAvailFlagsOffset));
    return (flags & kAvailFlagNoInterrupt) == 0;
  }
  const uint16_t used_event = DSEC_TRY(memory.read_obj<uint16_t>(used_event_addr()));
  const bool was_valid = state_.signalled_used_valid;
  const uint16_t old_idx = state_.signalled_used;
  state_.signalled_used = state_.next_used;
  state_.signalled_used_valid = true;
  return !was_valid || vring_need_event(used_event, state_.next_used, old_idx);
}

std::string VirtQueue::describe(const GuestMemory& memory) const {
  const QueueState& s = state_;
  if (!s.ready) {
    return "not ready";
  }
  const auto field = [&memory](uint64_t addr) {
    const auto value = memory.read_obj<uint16_t>(addr);
    return value ? std::to_string(*value) : std::string("unreadable");
  };
  std::string line =
      fmt::format("size {}, device next avail {} next used {}; driver avail idx {}, used idx {}",
                  s.size, s.next_avail, s.next_used, field(s.avail_ring + kAvailIdxOffset),
                  field(s.used_ring + kUsedIdxOffset));
  if (s.event_idx) {
    line += fmt::format("; used_event {}, avail_event {}, last notified at used {}",
                        field(used_event_addr()), field(avail_event_addr()),
                        s.signalled_used_valid ? std::to_string(s.signalled_used) : "none");
  } else {
    line += "; avail flags " + field(s.avail_ring + kAvailFlagsOffset);
  }
  if (s.broken) {
    line += "; BROKEN (needs a device reset)";
  }
  return line;
}

}  // namespace dsec::virtio

// libFuzzer target: a split virtqueue over guest memory whose every byte the fuzzer
// chooses, configured as the fuzzer says. Pops chains until the ring is empty or the queue
// breaks, returning each as used. Any crash, hang, sanitizer report or chain buffer
// outside guest memory is a bug.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "vmm/devices/virtio/queue.h"
#include "vmm/memory/guest_memory.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::fuzz::check;
using dsec::virtio::VirtQueue;

// Two RAM regions with a hole between them, so that buffers can straddle a region's end.
constexpr std::array<GuestRange, 2> kRam{{{0, 0x10000}, {0x20000, 0x10000}}};
constexpr uint16_t kMaxSize = 256;

// The queue configuration the fuzzer picks, ahead of the memory contents.
struct Header {
  uint16_t size;
  uint16_t next_avail;
  uint16_t next_used;
  uint8_t flags;  // bit 0: EVENT_IDX, bit 1: INDIRECT_DESC
  uint8_t pad;
  uint32_t desc_table;
  uint32_t avail_ring;
  uint32_t used_ring;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Header h{};
  if (size < sizeof(h)) {
    return -1;
  }
  std::memcpy(&h, data, sizeof(h));
  const std::span<const uint8_t> contents(data + sizeof(h), size - sizeof(h));

  GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
  dsec::fuzz::fill_guest_memory(mem, kRam, contents);

  VirtQueue queue = VirtQueue::create(kMaxSize).value();
  auto& s = queue.state();
  s.size = h.size;
  s.ready = true;
  s.desc_table = h.desc_table;
  s.avail_ring = h.avail_ring;
  s.used_ring = h.used_ring;
  s.next_avail = h.next_avail;
  s.next_used = h.next_used;
  s.event_idx = (h.flags & 1) != 0;
  s.indirect_desc = (h.flags & 2) != 0;
  // Most runs validate first as the transport does; some skip it, as a corrupt snapshot
  // would, to show that pop() alone is safe.
  if ((h.flags & 4) == 0 && !queue.validate(mem)) {
    return 0;
  }

  // Each pop consumes an entry or ends the loop; no more than a queue's worth is pending.
  for (int i = 0; i <= kMaxSize + 1; ++i) {
    auto chain = queue.pop(mem);
    if (!chain || !chain->has_value()) {
      break;
    }
    const dsec::virtio::DescriptorChain& c = **chain;
    check(c.readable.size() + c.writable.size() <= 2u * dsec::virtio::kMaxQueueSize);
    for (const auto* buffers : {&c.readable, &c.writable}) {
      for (const GuestRange& b : *buffers) {
        check(mem.contains(b.base, b.size));
      }
    }
    (void)queue.add_used(mem, c.head, static_cast<uint32_t>(c.writable_bytes()));
    (void)queue.needs_notification(mem);
  }
  return 0;
}

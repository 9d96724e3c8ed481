// A descriptor chain of a split virtqueue, read from guest memory and checked in full
// before a device sees any of it.
#pragma once

#include <cstdint>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/virtio_spec.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// One request from the driver: the head index to give back through the used ring, and the
// guest buffers the chain names, device-readable ones first (the spec requires that order;
// a chain that breaks it is rejected). Every buffer lies wholly inside one guest RAM
// region as the chain was read; the guest may still change the bytes in it.
struct DescriptorChain {
  uint16_t head = 0;
  std::vector<GuestRange> readable;
  std::vector<GuestRange> writable;

  // At most 2^47 (limit on descriptors times 2^32 - 1 each), so these never overflow.
  uint64_t readable_bytes() const;
  uint64_t writable_bytes() const;
};

// Where a chain's descriptors live and what the driver negotiated.
struct DescriptorTable {
  uint64_t address = 0;           // guest-physical address of the queue's descriptor table
  uint16_t size = 0;              // queue size: entries in the table, and the longest chain allowed
  bool indirect_allowed = false;  // VIRTIO_F_INDIRECT_DESC negotiated
};

// Reads the chain that starts at descriptor `head` (2.7.5). Fails, naming the head and
// the descriptor at fault, when:
// - an index is outside its table (the queue's, or an indirect table);
// - the chain is longer than its table, which is how a loop shows;
// - a buffer's address plus length wraps past 2^64, or the buffer is not wholly inside
//   one guest RAM region; likewise for an indirect table;
// - a device-readable buffer follows a device-writable one;
// - an indirect descriptor is used without VIRTIO_F_INDIRECT_DESC, also has NEXT, sits
//   inside an indirect table, or names a table whose length is zero, not a multiple of
//   16, or above kMaxQueueSize entries.
// An indirect descriptor ends the main chain (it cannot have NEXT); its table's entries
// then continue the chain, limited to the table's entry count. Each read is bounded, so
// this returns after at most size + kMaxQueueSize descriptor reads whatever the guest wrote.
Result<DescriptorChain> read_descriptor_chain(const GuestMemory& memory,
                                              const DescriptorTable& table, uint16_t head);

}  // namespace dsec::virtio

// A descriptor chain's buffers read as one stream of bytes: the pieces that cover a range
// of it, and copies between that stream and the host. Every device that splits a header
// from a payload across the guest's buffers (virtio-blk, virtio-net, virtio-vsock) does it
// through these, so that the walking across buffer boundaries is written, and bounded,
// once. The guest chose the buffers; every access still goes through GuestMemory's checks.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// The sub-ranges of `buffers` that cover [offset, offset + length) of the stream, clipped
// to its end: fewer bytes than `length` when the buffers hold fewer. Empty pieces are left
// out.
std::vector<GuestRange> slice_buffers(std::span<const GuestRange> buffers, uint64_t offset,
                                      uint64_t length = std::numeric_limits<uint64_t>::max());

// Copies the first out.size() bytes of the stream into `out`. Fails if the buffers hold
// fewer bytes or one of them is not inside guest memory.
Status read_buffers(const GuestMemory& memory, std::span<const GuestRange> buffers,
                    std::span<uint8_t> out);

// Copies `data` to the start of the stream. Fails if the buffers hold fewer bytes (having
// written as many as they hold) or one of them is not inside guest memory.
Status write_buffers(GuestMemory& memory, std::span<const GuestRange> buffers,
                     std::span<const uint8_t> data);

// The host memory behind each buffer, in order, for readv/writev/sendmsg or io_uring.
// Fails if a buffer is not inside guest memory. Empty buffers give no iovec.
Result<std::vector<iovec>> host_iovecs(GuestMemory& memory, std::span<const GuestRange> buffers);

}  // namespace dsec::virtio

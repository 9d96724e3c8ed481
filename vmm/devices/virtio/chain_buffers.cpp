#include "vmm/devices/virtio/chain_buffers.h"

#include <fmt/format.h>

#include <algorithm>

namespace dsec::virtio {
namespace {

// Calls copy(gpa, part) for each piece of the stream's first bytes.size() bytes, with the
// part of `bytes` that goes there; fails if the buffers hold fewer bytes.
template <typename Byte, typename Copy>
Status copy_pieces(std::span<const GuestRange> buffers, std::span<Byte> bytes, const char* verb,
                   Copy copy) {
  size_t done = 0;
  for (const GuestRange& piece : slice_buffers(buffers, 0, bytes.size())) {
    DSEC_TRY(copy(piece.base, bytes.subspan(done, piece.size)));
    done += piece.size;
  }
  if (done != bytes.size()) {
    return fail(fmt::format("the buffers hold {} bytes, fewer than the {} to {}", done,
                            bytes.size(), verb));
  }
  return ok();
}

}  // namespace

std::vector<GuestRange> slice_buffers(std::span<const GuestRange> buffers, uint64_t offset,
                                      uint64_t length) {
  std::vector<GuestRange> pieces;
  for (const GuestRange& buffer : buffers) {
    if (length == 0) {
      break;
    }
    if (offset >= buffer.size) {
      offset -= buffer.size;
      continue;
    }
    const uint64_t take = std::min(buffer.size - offset, length);
    pieces.push_back({buffer.base + offset, take});
    offset = 0;
    length -= take;
  }
  return pieces;
}

Status read_buffers(const GuestMemory& memory, std::span<const GuestRange> buffers,
                    std::span<uint8_t> out) {
  return copy_pieces(buffers, out, "read", [&memory](uint64_t gpa, std::span<uint8_t> part) {
    return memory.read(gpa, part);
  });
}

Status write_buffers(GuestMemory& memory, std::span<const GuestRange> buffers,
                     std::span<const uint8_t> data) {
  return copy_pieces(
      buffers, data, "write",
      [&memory](uint64_t gpa, std::span<const uint8_t> part) { return memory.write(gpa, part); });
}

Result<std::vector<iovec>> host_iovecs(GuestMemory& memory, std::span<const GuestRange> buffers) {
  std::vector<iovec> iovecs;
  iovecs.reserve(buffers.size());
  for (const GuestRange& buffer : buffers) {
    if (buffer.size == 0) {
      continue;
    }
    const std::span<uint8_t> bytes = DSEC_TRY(memory.span(buffer.base, buffer.size));
    iovecs.push_back({bytes.data(), bytes.size()});
  }
  return iovecs;
}

}  // namespace dsec::virtio

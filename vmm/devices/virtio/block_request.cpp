#include "vmm/devices/virtio/block_request.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>

namespace dsec::virtio {
namespace {

// struct virtio_blk_req's header (5.2.6), little-endian like the rings.
struct BlkHeader {
  uint32_t type;
  uint32_t reserved;
  uint64_t sector;
};
static_assert(sizeof(BlkHeader) == kBlkHeaderBytes);

// The byte at `offset` of `buffers` read as one stream; offset is below their total.
uint64_t byte_address(const std::vector<GuestRange>& buffers, uint64_t offset) {
  for (const GuestRange& buffer : buffers) {
    if (offset < buffer.size) {
      return buffer.base + offset;
    }
    offset -= buffer.size;
  }
  return 0;  // not reached for an offset below the total
}

std::optional<BlkHeader> read_header(const GuestMemory& memory,
                                     const std::vector<GuestRange>& readable) {
  std::array<uint8_t, kBlkHeaderBytes> bytes{};
  // The chain's buffers were inside guest RAM when it was read; read_buffers() checks again.
  if (!read_buffers(memory, readable, bytes)) {
    return std::nullopt;
  }
  BlkHeader header{};
  std::memcpy(&header, bytes.data(), sizeof(header));
  return header;
}

std::unexpected<RejectedRequest> reject(std::optional<uint64_t> status_gpa, const char* reason,
                                        uint8_t status = kBlkStatusIoErr) {
  return std::unexpected(RejectedRequest{status_gpa, status, reason});
}

}  // namespace

ParsedBlockRequest parse_block_request(const GuestMemory& memory, const DescriptorChain& chain,
                                       const BlockLimits& limits) {
  const uint64_t writable = chain.writable_bytes();
  if (writable == 0) {
    return reject(std::nullopt, "no device-writable status byte");
  }
  const uint64_t status_gpa = byte_address(chain.writable, writable - 1);
  const uint64_t writable_data = writable - 1;  // device-writable bytes before the status

  const uint64_t readable = chain.readable_bytes();
  if (readable < kBlkHeaderBytes) {
    return reject(status_gpa, "header shorter than 16 bytes");
  }
  const auto header = read_header(memory, chain.readable);
  if (!header) {
    return reject(status_gpa, "header not readable");
  }
  const uint64_t readable_data = readable - kBlkHeaderBytes;  // readable bytes after it

  BlockRequest request;
  request.type = header->type;
  request.status_gpa = status_gpa;
  switch (header->type) {
    case kBlkTypeIn:
    case kBlkTypeOut: {
      const bool is_write = header->type == kBlkTypeOut;
      if (is_write ? writable_data != 0 : readable_data != 0) {
        return reject(status_gpa, is_write ? "OUT with device-writable data bytes"
                                           : "IN with device-readable data bytes");
      }
      if (is_write && limits.read_only) {
        return reject(status_gpa, "OUT to a read-only disk");
      }
      request.data_bytes = is_write ? readable_data : writable_data;
      if (request.data_bytes % kSectorSize != 0) {
        return reject(status_gpa, "data length not a multiple of 512");
      }
      if (request.data_bytes > limits.max_data_bytes) {
        return reject(status_gpa, "data longer than the device takes in one request");
      }
      // sector <= capacity first, so that capacity - sector cannot wrap; the sector
      // count is data_bytes / 512, so sector * 512 is never computed from a guest value
      // that could overflow.
      const uint64_t sectors = request.data_bytes / kSectorSize;
      if (header->sector > limits.capacity_sectors ||
          sectors > limits.capacity_sectors - header->sector) {
        return reject(status_gpa, "sectors outside the disk");
      }
      request.sector = header->sector;
      request.data = is_write ? slice_buffers(chain.readable, kBlkHeaderBytes, readable_data)
                              : slice_buffers(chain.writable, 0, writable_data);
      if (request.data.size() > limits.max_segments) {
        return reject(status_gpa, "data in more buffers than seg_max");
      }
      return request;
    }
    case kBlkTypeFlush:
      if (readable_data != 0 || writable_data != 0) {
        return reject(status_gpa, "FLUSH with data bytes");
      }
      return request;
    case kBlkTypeGetId:
      if (readable_data != 0) {
        return reject(status_gpa, "GET_ID with device-readable data bytes");
      }
      if (writable_data == 0) {
        return reject(status_gpa, "GET_ID without room for the id");
      }
      // The device writes at most 20 bytes; a larger buffer keeps the rest as it was.
      request.data_bytes = std::min(writable_data, kBlkIdBytes);
      request.data = slice_buffers(chain.writable, 0, request.data_bytes);
      return request;
    default:
      return reject(status_gpa, "unsupported request type", kBlkStatusUnsupp);
  }
}

}  // namespace dsec::virtio

// virtio-blk requests (virtio 1.2, 5.2.6): turns a descriptor chain the guest wrote into a
// checked request, before any I/O. Pure: it reads the 16-byte header from guest memory and
// nothing else, so that it can be fuzzed and tested without a disk or an event loop.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <vector>

#include "vmm/devices/virtio/chain_buffers.h"
#include "vmm/devices/virtio/descriptor_chain.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio {

// Request types (5.2.6, struct virtio_blk_req's `type`).
inline constexpr uint32_t kBlkTypeIn = 0;
inline constexpr uint32_t kBlkTypeOut = 1;
inline constexpr uint32_t kBlkTypeFlush = 4;
inline constexpr uint32_t kBlkTypeGetId = 8;

// Status values (5.2.6).
inline constexpr uint8_t kBlkStatusOk = 0;
inline constexpr uint8_t kBlkStatusIoErr = 1;
inline constexpr uint8_t kBlkStatusUnsupp = 2;

// Sizes the spec fixes: sectors are always 512 bytes whatever blk_size says (5.2.4), and
// GET_ID's answer is at most 20 bytes (VIRTIO_BLK_ID_BYTES).
inline constexpr uint64_t kSectorSize = 512;
inline constexpr uint64_t kBlkIdBytes = 20;
inline constexpr uint64_t kBlkHeaderBytes = 16;  // le32 type, le32 reserved, le64 sector

// What the disk allows a request.
struct BlockLimits {
  uint64_t capacity_sectors = 0;
  bool read_only = false;
  // At most this many guest buffers carry a request's data: the seg_max the device offers,
  // and well under IOV_MAX, so that one readv/writev takes them all.
  uint32_t max_segments = 254;
  // At most this many data bytes a request: the used ring's 32-bit length must count them
  // plus the status byte, and Linux sends far smaller requests (max_sectors_kb).
  uint64_t max_data_bytes = uint64_t{1} << 30;
};

// A request worth doing: read or write `data` at `sector`, flush, or answer GET_ID.
struct BlockRequest {
  uint32_t type = kBlkTypeIn;  // kBlkTypeIn, kBlkTypeOut, kBlkTypeFlush or kBlkTypeGetId
  uint64_t sector = 0;         // kBlkTypeIn and kBlkTypeOut only
  // The data buffers, in order: device-readable ones for OUT, device-writable ones for IN
  // and GET_ID, none for FLUSH. Empty pieces are left out.
  std::vector<GuestRange> data;
  uint64_t data_bytes = 0;  // their total: a multiple of kSectorSize for IN and OUT
  uint64_t status_gpa = 0;  // the one status byte, the chain's last device-writable byte
};

// A request the device answers at once, without I/O.
struct RejectedRequest {
  // Where to write `status`; nullopt when the chain has no device-writable byte, so that
  // the device can only return it with a used length of 0.
  std::optional<uint64_t> status_gpa;
  uint8_t status = kBlkStatusIoErr;  // kBlkStatusIoErr or kBlkStatusUnsupp
  const char* reason = "";           // for the log: what the guest got wrong
};

using ParsedBlockRequest = std::expected<BlockRequest, RejectedRequest>;

// Checks a chain as a virtio-blk request. The layout of descriptors is free (VERSION_1
// implies ANY_LAYOUT, 2.7.4): the device-readable bytes are the header followed, for OUT,
// by the data; the device-writable bytes are the data, for IN and GET_ID, followed by the
// status byte. Rejected with IOERR:
// - no status byte (no device-writable byte at all: the status sits in a read-only buffer
//   or is missing), which also leaves status_gpa empty;
// - fewer than 16 device-readable bytes, or a header that cannot be read;
// - IN or OUT whose data length is not a multiple of 512, exceeds max_data_bytes or
//   spans more than max_segments buffers, or whose sectors do not lie wholly inside the
//   disk (checked without overflow);
// - OUT to a read-only disk (5.2.6.2: the device must not write);
// - bytes where the type has none: readable bytes after the header of IN, FLUSH or
//   GET_ID, writable bytes before the status of OUT or FLUSH; GET_ID without room for
//   any of the id.
// Rejected with UNSUPP: any other type (DISCARD, WRITE_ZEROES, ... are not offered).
ParsedBlockRequest parse_block_request(const GuestMemory& memory, const DescriptorChain& chain,
                                       const BlockLimits& limits);

}  // namespace dsec::virtio

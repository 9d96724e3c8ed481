// libFuzzer target: the virtio-blk request parser on chains the fuzzer writes. The chain
// is read from a descriptor table in fuzzer-chosen guest memory, as the queue would read
// it, so that the parser sees every layout a guest can make; the disk's size, read-only
// flag and limits are the fuzzer's too. Any crash, sanitizer report, or an accepted request
// that breaks one of the promises checked below is a bug.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "vmm/devices/virtio/block_request.h"
#include "vmm/devices/virtio/descriptor_chain.h"
#include "vmm/memory/guest_memory.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::fuzz::check;
namespace virtio = dsec::virtio;

// Two RAM regions with a hole between them, so that buffers can sit next to a region's end.
constexpr std::array<GuestRange, 2> kRam{{{0, 0x10000}, {0x20000, 0x10000}}};

// The configuration the fuzzer picks, ahead of the memory contents.
struct Header {
  uint64_t capacity_sectors;
  uint32_t desc_table;
  uint32_t max_data_bytes;
  uint16_t table_size;
  uint16_t head;
  uint8_t flags;  // bit 0: read-only disk, bit 1: INDIRECT_DESC
  uint8_t max_segments;
  uint8_t pad[6];
};

bool inside_one_of(const std::vector<GuestRange>& buffers, uint64_t gpa, uint64_t len) {
  return std::any_of(buffers.begin(), buffers.end(), [&](const GuestRange& b) {
    return gpa >= b.base && len <= b.size && gpa - b.base <= b.size - len;
  });
}

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

  const virtio::DescriptorTable table{h.desc_table, std::clamp<uint16_t>(h.table_size, 1, 256),
                                      (h.flags & 2) != 0};
  auto chain =
      virtio::read_descriptor_chain(mem, table, static_cast<uint16_t>(h.head % table.size));
  if (!chain) {
    return 0;  // the queue would break: the parser never sees it
  }
  const virtio::BlockLimits limits{.capacity_sectors = h.capacity_sectors,
                                   .read_only = (h.flags & 1) != 0,
                                   .max_segments = h.max_segments,
                                   .max_data_bytes = h.max_data_bytes};
  const virtio::ParsedBlockRequest parsed = virtio::parse_block_request(mem, *chain, limits);

  if (!parsed) {
    const virtio::RejectedRequest& r = parsed.error();
    check(r.status == virtio::kBlkStatusIoErr || r.status == virtio::kBlkStatusUnsupp);
    // A status byte to write, and only then, lies in a device-writable buffer.
    check(r.status_gpa.has_value() == (chain->writable_bytes() != 0));
    if (r.status_gpa) {
      check(inside_one_of(chain->writable, *r.status_gpa, 1));
    }
    return 0;
  }

  const virtio::BlockRequest& r = *parsed;
  check(inside_one_of(chain->writable, r.status_gpa, 1));
  uint64_t total = 0;
  const auto& own = r.type == virtio::kBlkTypeOut ? chain->readable : chain->writable;
  for (const GuestRange& piece : r.data) {
    check(piece.size != 0);
    check(mem.contains(piece.base, piece.size));
    check(inside_one_of(own, piece.base, piece.size));
    total += piece.size;
  }
  check(total == r.data_bytes);
  switch (r.type) {
    case virtio::kBlkTypeIn:
    case virtio::kBlkTypeOut:
      check(r.data_bytes % virtio::kSectorSize == 0);
      check(r.data_bytes <= limits.max_data_bytes);
      check(r.data.size() <= limits.max_segments);
      check(r.sector <= limits.capacity_sectors);
      check(r.data_bytes / virtio::kSectorSize <= limits.capacity_sectors - r.sector);
      check(r.type == virtio::kBlkTypeIn || !limits.read_only);
      break;
    case virtio::kBlkTypeFlush:
      check(r.data.empty());
      break;
    case virtio::kBlkTypeGetId:
      check(r.data_bytes >= 1 && r.data_bytes <= virtio::kBlkIdBytes);
      break;
    default:
      check(false);  // other types are refused as unsupported
  }
  return 0;
}

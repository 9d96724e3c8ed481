// Guest RAM: non-overlapping regions of guest-physical memory, each backed by a host
// mapping. Every access the VMM makes to guest memory goes through span(), which refuses
// any range that is not wholly inside one region; the guest chooses most of the addresses
// that reach it, so nothing else may turn a guest-physical address into a host pointer.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/memory/mmap_region.h"

namespace dsec {

// A range of guest-physical addresses, [base, base + size).
struct GuestRange {
  uint64_t base = 0;
  uint64_t size = 0;

  uint64_t end() const { return base + size; }
  bool operator==(const GuestRange&) const = default;
};

// One region of guest RAM: where it sits in the guest and the mapping behind it.
class GuestRegion {
 public:
  GuestRegion(uint64_t gpa, MmapRegion mapping) : gpa_(gpa), mapping_(std::move(mapping)) {}

  uint64_t gpa() const { return gpa_; }
  uint64_t size() const { return mapping_.size(); }
  uint64_t end() const { return gpa_ + size(); }
  GuestRange range() const { return {gpa_, size()}; }
  // Host address of the region's first byte (for KVM_SET_USER_MEMORY_REGION).
  uint8_t* host() const { return mapping_.data(); }

 private:
  uint64_t gpa_;
  MmapRegion mapping_;
};

class GuestMemory {
 public:
  // One private anonymous mapping per range.
  static Result<GuestMemory> anonymous(std::span<const GuestRange> ranges);
  // A snapshot's memory file, mapped copy-on-write: the ranges' bytes lie in the file back
  // to back in guest-physical order (a range's offset is the sum of the sizes of the ranges
  // below it). Fails unless the file's size is exactly the ranges' total, since touching a
  // page past the end of a shorter file would kill the process with SIGBUS. Guest writes
  // become private copies; the file never changes, and every VM mapping it shares its page
  // cache. The file must not be truncated while mapped. fd may be read-only, and may be
  // closed afterwards. Each region starts 2 MiB aligned in the host, as with anonymous().
  static Result<GuestMemory> private_file(std::span<const GuestRange> ranges, int fd);
  // Takes mapped regions. They must be page-aligned, non-empty, must not overlap and must
  // not wrap past the top of the 64-bit address space.
  static Result<GuestMemory> from_regions(std::vector<GuestRegion> regions);

  GuestMemory(GuestMemory&&) noexcept = default;
  GuestMemory& operator=(GuestMemory&&) noexcept = default;
  GuestMemory(const GuestMemory&) = delete;
  GuestMemory& operator=(const GuestMemory&) = delete;

  // Sorted by guest-physical address; the builder registers each as a KVM memory slot.
  std::span<const GuestRegion> regions() const { return regions_; }
  uint64_t total_size() const;

  // True if [gpa, gpa + len) lies wholly inside one region. An empty range is inside a
  // region if gpa is in [region start, region end].
  bool contains(uint64_t gpa, uint64_t len) const;

  // The host bytes behind [gpa, gpa + len); fails if the range is not wholly inside one
  // region (ranges that wrap past 2^64 included).
  Result<std::span<uint8_t>> span(uint64_t gpa, uint64_t len);
  Result<std::span<const uint8_t>> span(uint64_t gpa, uint64_t len) const;
  Result<uint8_t*> host_address(uint64_t gpa);

  Status read(uint64_t gpa, std::span<uint8_t> out) const;
  Status write(uint64_t gpa, std::span<const uint8_t> data);
  Status fill(uint64_t gpa, uint64_t len, uint8_t value);
  // Backs [gpa, gpa + len) with a private, copy-on-write mapping of bytes [offset,
  // offset + len) of the file `fd`: the guest reads them from the host's page cache,
  // shared with every VM that maps the same file, and a page is copied only when written.
  // gpa, len and offset must be multiples of 4 KiB and the range inside one region.
  Status map_file_pages(uint64_t gpa, uint64_t len, int fd, uint64_t offset);

  template <typename T>
  requires std::is_trivially_copyable_v<T> Result<T> read_obj(uint64_t gpa)
  const {
    T value;
    DSEC_TRY(read(gpa, std::span(reinterpret_cast<uint8_t*>(&value), sizeof(T))));
    return value;
  }
  template <typename T>
  requires std::is_trivially_copyable_v<T> Status write_obj(uint64_t gpa, const T& value) {
    return write(gpa, std::span(reinterpret_cast<const uint8_t*>(&value), sizeof(T)));
  }

 private:
  explicit GuestMemory(std::vector<GuestRegion> regions) : regions_(std::move(regions)) {}
  // The region wholly containing [gpa, gpa + len), or nullptr.
  const GuestRegion* find(uint64_t gpa, uint64_t len) const;
  Result<std::span<uint8_t>> checked_span(uint64_t gpa, uint64_t len) const;

  std::vector<GuestRegion> regions_;
};

}  // namespace dsec

#include "vmm/memory/guest_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dsec {

namespace {

constexpr uint64_t kPageSize = 4096;

std::string describe(uint64_t gpa, uint64_t len) {
  return fmt::format("guest memory range [{:#x}, +{:#x})", gpa, len);
}

// Maps each range with map_range(range, offset), in guest-physical order, which is also the
// order of the regions in a memory file: offset is the sum of the sizes of the ranges below
// it. `backing` ends the error's context.
template <typename MapRange>
Result<GuestMemory> map_each(std::span<const GuestRange> ranges, const char* backing,
                             MapRange map_range) {
  std::vector<GuestRange> sorted(ranges.begin(), ranges.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const GuestRange& a, const GuestRange& b) { return a.base < b.base; });
  std::vector<GuestRegion> regions;
  regions.reserve(sorted.size());
  uint64_t offset = 0;
  for (const GuestRange& range : sorted) {
    Result<MmapRegion> mapping = map_range(range, offset);
    if (!mapping) {
      return std::unexpected(
          mapping.error().with_context(fmt::format("guest RAM at {:#x}{}", range.base, backing)));
    }
    regions.emplace_back(range.base, std::move(*mapping));
    offset += range.size;
  }
  return GuestMemory::from_regions(std::move(regions));
}

}  // namespace

Result<GuestMemory> GuestMemory::anonymous(std::span<const GuestRange> ranges) {
  return map_each(ranges, "", [](const GuestRange& range, uint64_t) {
    return MmapRegion::anonymous(range.size);
  });
}

Result<GuestMemory> GuestMemory::private_file(std::span<const GuestRange> ranges, int fd) {
  uint64_t total = 0;
  for (const GuestRange& range : ranges) {
    if (range.size > UINT64_MAX - total) {
      return fail("guest RAM ranges add up to more than 2^64 bytes");
    }
    total += range.size;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return fail_errno("fstat of the guest memory file", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail("the guest memory file is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) != total) {
    return fail(fmt::format("the guest memory file is {} bytes, but the guest's RAM is {} bytes",
                            st.st_size, total),
                "the memory file does not belong to this snapshot, or was truncated: take the "
                "snapshot again");
  }
  return map_each(ranges, " from its memory file", [fd](const GuestRange& range, uint64_t offset) {
    return MmapRegion::private_file(fd, offset, range.size);
  });
}

Result<GuestMemory> GuestMemory::from_regions(std::vector<GuestRegion> regions) {
  if (regions.empty()) {
    return fail("guest memory needs at least one region");
  }
  std::sort(regions.begin(), regions.end(),
            [](const GuestRegion& a, const GuestRegion& b) { return a.gpa() < b.gpa(); });
  for (size_t i = 0; i < regions.size(); ++i) {
    const GuestRegion& region = regions[i];
    if (region.size() == 0 || region.gpa() % kPageSize != 0 || region.size() % kPageSize != 0) {
      return fail(describe(region.gpa(), region.size()) +
                  ": a region must be non-empty and 4 KiB aligned in address and size");
    }
    if (region.size() > UINT64_MAX - region.gpa()) {
      return fail(describe(region.gpa(), region.size()) + " wraps past the top of memory");
    }
    if (i > 0 && regions[i - 1].end() > region.gpa()) {
      return fail(fmt::format("{} overlaps {}", describe(region.gpa(), region.size()),
                              describe(regions[i - 1].gpa(), regions[i - 1].size())));
    }
  }
  return GuestMemory(std::move(regions));
}

uint64_t GuestMemory::total_size() const {
  uint64_t total = 0;
  for (const GuestRegion& region : regions_) {
    total += region.size();
  }
  return total;
}

const GuestRegion* GuestMemory::find(uint64_t gpa, uint64_t len) const {
  // The last region starting at or below gpa is the only candidate.
  auto it =
      std::upper_bound(regions_.begin(), regions_.end(), gpa,
                       [](uint64_t address, const GuestRegion& r) { return address < r.gpa(); });
  if (it == regions_.begin()) {
    return nullptr;
  }
  const GuestRegion& region = *std::prev(it);
  // Compared as offsets so that nothing overflows however large gpa and len are.
  const uint64_t offset = gpa - region.gpa();
  if (offset > region.size() || len > region.size() - offset) {
    return nullptr;
  }
  return &region;
}

bool GuestMemory::contains(uint64_t gpa, uint64_t len) const {
  return find(gpa, len) != nullptr;
}

Result<std::span<uint8_t>> GuestMemory::checked_span(uint64_t gpa, uint64_t len) const {
  const GuestRegion* region = find(gpa, len);
  if (region == nullptr) {
    return fail(describe(gpa, len) + " is not inside guest RAM");
  }
  return std::span<uint8_t>(region->host() + (gpa - region->gpa()), len);
}

Result<std::span<uint8_t>> GuestMemory::span(uint64_t gpa, uint64_t len) {
  return checked_span(gpa, len);
}

Result<std::span<const uint8_t>> GuestMemory::span(uint64_t gpa, uint64_t len) const {
  return checked_span(gpa, len);
}

Result<uint8_t*> GuestMemory::host_address(uint64_t gpa) {
  return DSEC_TRY(span(gpa, 1)).data();
}

Status GuestMemory::read(uint64_t gpa, std::span<uint8_t> out) const {
  const std::span<const uint8_t> source = DSEC_TRY(span(gpa, out.size()));
  if (!out.empty()) {
    std::memcpy(out.data(), source.data(), out.size());
  }
  return ok();
}

Status GuestMemory::write(uint64_t gpa, std::span<const uint8_t> data) {
  const std::span<uint8_t> target = DSEC_TRY(span(gpa, data.size()));
  if (!data.empty()) {
    std::memcpy(target.data(), data.data(), data.size());
  }
  return ok();
}

Status GuestMemory::fill(uint64_t gpa, uint64_t len, uint8_t value) {
  const std::span<uint8_t> target = DSEC_TRY(span(gpa, len));
  std::fill(target.begin(), target.end(), value);
  return ok();
}

Status GuestMemory::map_file_pages(uint64_t gpa, uint64_t len, int fd, uint64_t offset) {
  if (gpa % kPageSize != 0 || len % kPageSize != 0 || offset % kPageSize != 0 || len == 0) {
    return fail(
        fmt::format("{} from file offset {:#x}: a file mapping needs non-empty, 4 KiB "
                    "aligned addresses, size and offset",
                    describe(gpa, len), offset));
  }
  const std::span<uint8_t> target = DSEC_TRY(span(gpa, len));
  void* mapped = ::mmap(target.data(), len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
                        static_cast<off_t>(offset));
  if (mapped == MAP_FAILED) {
    const int error = errno;
    // A failed MAP_FIXED may have unmapped the range: put fresh anonymous memory back, so
    // that the region stays whole.
    const bool restored =
        ::mmap(target.data(), len, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED;
    return fail_errno(fmt::format("mapping file offset {:#x} into {}{}", offset, describe(gpa, len),
                                  restored ? ""
                                           : " (and the range could not be remapped: "
                                             "this guest memory is unusable)"),
                      error);
  }
  return ok();
}

}  // namespace dsec

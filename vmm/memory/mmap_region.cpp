#include "vmm/memory/mmap_region.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <utility>

namespace dsec {

namespace {

constexpr uint64_t kPageSize = 4096;
constexpr uint64_t kHugePageSize = 2 << 20;

Status check_size(uint64_t size) {
  if (size == 0 || size % kPageSize != 0) {
    return fail(
        fmt::format("guest memory region of {:#x} bytes: size must be a non-zero "
                    "multiple of 4 KiB",
                    size));
  }
  return ok();
}

// `size` bytes of private anonymous memory (MAP_NORESERVE) starting on a 2 MiB boundary.
// Reserves a little more and keeps the aligned window: guest regions start 2 MiB aligned,
// and KVM maps a guest's 2 MiB page with one huge page-table entry only where the host
// address has the same alignment (and the host backs it with a huge page).
Result<uint8_t*> map_aligned_anonymous(uint64_t size) {
  const uint64_t reserved = size + kHugePageSize - kPageSize;
  void* data = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) {
    return fail_errno(fmt::format("mmap of {} MiB of guest memory", size >> 20), errno,
                      "lower the VM's memory size or raise the process's address-space limit");
  }
  auto* start = static_cast<uint8_t*>(data);
  const auto address = reinterpret_cast<uintptr_t>(start);
  auto* aligned = start + ((kHugePageSize - address % kHugePageSize) % kHugePageSize);
  if (aligned != start) {
    ::munmap(start, aligned - start);
  }
  if (auto* end = aligned + size; end != start + reserved) {
    ::munmap(end, start + reserved - end);
  }
  return aligned;
}

}  // namespace

Result<MmapRegion> MmapRegion::anonymous(uint64_t size) {
  DSEC_TRY(check_size(size));
  uint8_t* data = DSEC_TRY(map_aligned_anonymous(size));
  // Ask for huge pages also where transparent huge pages are `madvise` only (Ubuntu's
  // default, and PVM hosts seen here), as QEMU does for its guest RAM. Advice, not a
  // requirement: a kernel without THP refuses it, and the memory works all the same.
  ::madvise(data, size, MADV_HUGEPAGE);
  return MmapRegion(data, size);
}

Result<MmapRegion> MmapRegion::private_file(int fd, uint64_t offset, uint64_t size) {
  DSEC_TRY(check_size(size));
  if (offset % kPageSize != 0) {
    return fail(
        fmt::format("guest memory from file offset {:#x}: the offset must be a multiple "
                    "of 4 KiB",
                    offset));
  }
  // Reserve an aligned window, then put the file over it. No MADV_HUGEPAGE here: a clone
  // should pay for the 4 KiB pages it writes, not for a 2 MiB copy of each page it touches.
  uint8_t* data = DSEC_TRY(map_aligned_anonymous(size));
  if (::mmap(data, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, fd,
             static_cast<off_t>(offset)) == MAP_FAILED) {
    const int error = errno;
    ::munmap(data, size);
    return fail_errno(
        fmt::format("mmap of {} MiB of guest memory from file offset {:#x}", size >> 20, offset),
        error, "is the memory file a regular file open for reading?");
  }
  return MmapRegion(data, size);
}

MmapRegion::MmapRegion(MmapRegion&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MmapRegion& MmapRegion::operator=(MmapRegion&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MmapRegion::~MmapRegion() {
  unmap();
}

void MmapRegion::unmap() {
  if (data_ != nullptr) {
    ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
}

}  // namespace dsec

#include "vmm/memory/mmap_region.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <utility>

namespace dsec {

namespace {
constexpr uint64_t kPageSize = 4096;
}  // namespace

Result<MmapRegion> MmapRegion::anonymous(uint64_t size) {
  if (size == 0 || size % kPageSize != 0) {
    return fail(
        fmt::format("guest memory region of {:#x} bytes: size must be a non-zero "
                    "multiple of 4 KiB",
                    size));
  }
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) {
    return fail_errno(fmt::format("mmap of {} MiB of anonymous guest memory", size >> 20), errno,
                      "lower the VM's memory size or raise the process's address-space limit");
  }
  return MmapRegion(static_cast<uint8_t*>(data), size);
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

// One host mapping that backs a region of guest memory. Creating the backing (anonymous
// memory now; memfd or a snapshot file mapped MAP_PRIVATE later) is kept apart from
// GuestMemory, which only decides who may touch which bytes.
#pragma once

#include <cstdint>

#include "vmm/common/error.h"

namespace dsec {

class MmapRegion {
 public:
  // Private anonymous memory of `size` bytes (a non-zero multiple of the 4 KiB page),
  // MAP_NORESERVE: pages cost memory only once the guest or the VMM touches them. Its
  // start is 2 MiB aligned, so that KVM can map huge pages where the host has them.
  static Result<MmapRegion> anonymous(uint64_t size);

  MmapRegion(MmapRegion&& other) noexcept;
  MmapRegion& operator=(MmapRegion&& other) noexcept;
  MmapRegion(const MmapRegion&) = delete;
  MmapRegion& operator=(const MmapRegion&) = delete;
  ~MmapRegion();  // munmap

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MmapRegion(uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  void unmap();

  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace dsec

// One host mapping that backs a region of guest memory. Creating the backing (anonymous
// memory, or a snapshot's memory file mapped copy-on-write) is kept apart from GuestMemory,
// which only decides who may touch which bytes. Every backend starts its mapping on a 2 MiB
// boundary, so that KVM can map huge pages where the host has them.
#pragma once

#include <cstdint>

#include "vmm/common/error.h"

namespace dsec {

class MmapRegion {
 public:
  // Private anonymous memory of `size` bytes (a non-zero multiple of the 4 KiB page),
  // MAP_NORESERVE: pages cost memory only once the guest or the VMM touches them.
  static Result<MmapRegion> anonymous(uint64_t size);
  // Bytes [offset, offset + size) of the file `fd` (open for reading at least), mapped
  // MAP_PRIVATE: reads come from the host's page cache, shared with every process mapping
  // the same file, and a write copies only the page written; the file never changes. size
  // and offset must be multiples of 4 KiB and the range inside the file (the caller checks
  // the file's size: touching a page past its end would raise SIGBUS). The mapping holds
  // its own reference to the file, so fd may be closed afterwards.
  static Result<MmapRegion> private_file(int fd, uint64_t offset, uint64_t size);

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

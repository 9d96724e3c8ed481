// A snapshot's memory file: the guest's RAM regions back to back in guest-physical order (a
// region's offset is the sum of the sizes of the regions below it), nothing else. Restore
// maps it copy-on-write (GuestMemory::private_file). All-zero pages are holes, so the file
// takes on disk only what the guest has written.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::snapshot {

struct MemoryFileFigures {
  uint64_t ram_bytes = 0;      // the file's size: all of the guest's RAM
  uint64_t written_bytes = 0;  // bytes of non-zero pages, written; the rest are holes
};

// Writes every region of `memory` to `path`, atomically (a reader sees the previous file or
// the whole new one). The guest must not run meanwhile.
Result<MemoryFileFigures> write_memory_file(const std::string& path, const GuestMemory& memory);

// Fails unless `fd` is a regular file of exactly `expected_total` bytes, the RAM size the
// snapshot's state gives. A shorter file mapped MAP_PRIVATE would kill the VMM with SIGBUS
// when the guest touched a page past its end; a longer one belongs to another snapshot.
Status check_memory_file(int fd, uint64_t expected_total);

// Opens `path` read-only and checks it with check_memory_file; errors name the path.
Result<UniqueFd> open_memory_file(const std::string& path, uint64_t expected_total);

}  // namespace dsec::snapshot

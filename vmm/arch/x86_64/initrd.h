// Placing and loading the initrd: as high as the kernel allows in low RAM, clear of the
// kernel, page-aligned.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

// Where an initrd of `size` bytes goes: the highest page-aligned address below both the
// kernel's initrd_addr_max and the end of RAM below the MMIO gap, above the kernel.
Result<GuestRange> place_initrd(const GuestMemory& memory, const LoadedKernel& kernel,
                                uint64_t size);
// Places and copies `bytes`.
Result<GuestRange> load_initrd(GuestMemory& memory, const LoadedKernel& kernel,
                               std::span<const uint8_t> bytes);
// An initrd file placed in guest memory but not read into it yet: write() reads it there
// and fails only on a host error. The plan holds the file open.
struct PlannedInitrd {
  GuestRange range;
  std::function<Status(GuestMemory&)> write;
};
// Opens and places the file; errors start with the path.
Result<PlannedInitrd> plan_initrd_file(const GuestMemory& memory, const LoadedKernel& kernel,
                                       const std::string& path);
// Places the file and reads it straight into guest memory; errors start with the path.
Result<GuestRange> load_initrd_file(GuestMemory& memory, const LoadedKernel& kernel,
                                    const std::string& path);

}  // namespace dsec::x86_64

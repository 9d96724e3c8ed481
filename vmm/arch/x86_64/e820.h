// The guest's physical memory map, as the zero page (e820) and hvm_start_info (memmap)
// carry it.
#pragma once

#include <asm/bootparam.h>

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

// Entry types shared by e820 and the PVH memmap.
inline constexpr uint32_t kE820Ram = 1;
inline constexpr uint32_t kE820Reserved = 2;

// RAM ranges as usable memory, except [kMpTableAddr, kHighMemStart) (MP table and the
// legacy BIOS area), reported reserved, plus KVM's identity-map and TSS pages reserved.
// Sorted by address.
std::vector<boot_e820_entry> e820_map(std::span<const GuestRange> ram);
std::vector<boot_e820_entry> e820_map(const GuestMemory& memory);

}  // namespace dsec::x86_64

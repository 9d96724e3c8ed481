// PVH boot: the start-of-day structures from Xen's public header
// xen/include/public/arch-x86/hvm/start_info.h, which Linux's PVH entry reads.
#pragma once

#include <asm/bootparam.h>

#include <cstdint>
#include <optional>
#include <span>

#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

inline constexpr uint32_t kHvmStartMagic = 0x336ec578;
// Version 1 added the memory map.
inline constexpr uint32_t kHvmStartInfoVersion = 1;

struct hvm_start_info {
  uint32_t magic;           // kHvmStartMagic
  uint32_t version;         // kHvmStartInfoVersion
  uint32_t flags;           // SIF_xxx, none for us
  uint32_t nr_modules;      // entries at modlist_paddr
  uint64_t modlist_paddr;   // hvm_modlist_entry[nr_modules]
  uint64_t cmdline_paddr;   // NUL-terminated command line
  uint64_t rsdp_paddr;      // ACPI RSDP, 0 if none
  uint64_t memmap_paddr;    // hvm_memmap_table_entry[memmap_entries] (version 1)
  uint32_t memmap_entries;  //
  uint32_t reserved;        // zero
};

struct hvm_modlist_entry {
  uint64_t paddr;
  uint64_t size;
  uint64_t cmdline_paddr;  // 0: no command line for the module
  uint64_t reserved;
};

struct hvm_memmap_table_entry {
  uint64_t addr;
  uint64_t size;
  uint32_t type;  // e820 types
  uint32_t reserved;
};

static_assert(sizeof(hvm_start_info) == 56);
static_assert(sizeof(hvm_modlist_entry) == 32);
static_assert(sizeof(hvm_memmap_table_entry) == 24);

// Writes hvm_start_info at kPvhStartInfoAddr, the initrd (if any) as its one module at
// kPvhModlistAddr, and the memory map at kPvhMemmapAddr.
Status write_pvh_start_info(GuestMemory& memory, uint64_t cmdline_addr,
                            std::optional<GuestRange> initrd,
                            std::span<const boot_e820_entry> e820);

}  // namespace dsec::x86_64

#include "vmm/arch/x86_64/pvh.h"

#include <fmt/format.h>

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

static_assert(kPvhStartInfoAddr + sizeof(hvm_start_info) <= kPvhModlistAddr);
static_assert(kPvhModlistAddr + sizeof(hvm_modlist_entry) <= kPvhMemmapAddr);

Status write_pvh_start_info(GuestMemory& memory, uint64_t cmdline_addr,
                            std::optional<GuestRange> initrd,
                            std::span<const boot_e820_entry> e820) {
  constexpr uint64_t kMaxEntries =
      (kPvhMemmapEnd - kPvhMemmapAddr) / sizeof(hvm_memmap_table_entry);
  if (e820.size() > kMaxEntries) {
    return fail(fmt::format("the memory map has {} entries; the PVH memmap area holds {}",
                            e820.size(), kMaxEntries));
  }
  hvm_start_info info{};
  info.magic = kHvmStartMagic;
  info.version = kHvmStartInfoVersion;
  info.cmdline_paddr = cmdline_addr;
  if (initrd) {
    DSEC_TRY(
        memory.write_obj(kPvhModlistAddr, hvm_modlist_entry{initrd->base, initrd->size, 0, 0}));
    info.nr_modules = 1;
    info.modlist_paddr = kPvhModlistAddr;
  }
  for (size_t i = 0; i < e820.size(); ++i) {
    const hvm_memmap_table_entry entry{e820[i].addr, e820[i].size, e820[i].type, 0};
    DSEC_TRY(memory.write_obj(kPvhMemmapAddr + i * sizeof(entry), entry));
  }
  info.memmap_paddr = kPvhMemmapAddr;
  info.memmap_entries = static_cast<uint32_t>(e820.size());
  return memory.write_obj(kPvhStartInfoAddr, info);
}

}  // namespace dsec::x86_64

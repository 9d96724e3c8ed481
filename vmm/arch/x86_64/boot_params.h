// The zero page (struct boot_params) for the 64-bit Linux boot protocol.
#pragma once

#include <asm/bootparam.h>

#include <cstdint>
#include <optional>
#include <span>

#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

// The zero page for `kernel`: its setup header (a bzImage's own, or a minimal one for an
// ELF vmlinux) with the loader's fields filled in, the command line at `cmdline_addr`,
// the initrd, and the memory map. Fails if the map has more entries than the zero page
// holds.
Result<boot_params> make_boot_params(const LoadedKernel& kernel, uint64_t cmdline_addr,
                                     std::optional<GuestRange> initrd,
                                     std::span<const boot_e820_entry> e820);

}  // namespace dsec::x86_64

// Identity-mapped page tables for the 64-bit Linux entry, which starts with paging on.
#pragma once

#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

// PML4 at kPml4Addr -> PDPT at kPdptAddr -> PD at kPdAddr of 2 MiB pages mapping
// [0, kIdentityMapSize) onto itself: enough for the kernel, zero page and command line,
// the ranges the boot protocol asks to be mapped. The kernel builds its own tables next.
Status write_identity_page_tables(GuestMemory& memory);

}  // namespace dsec::x86_64

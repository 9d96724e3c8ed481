// Writes all the boot data a loaded kernel needs into guest memory. The builder then sets
// the boot vCPU's registers from boot_regs()/boot_sregs() and every vCPU's CPUID, MSRs,
// FPU and LAPIC from cpuid.h and vcpu_init.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

struct BootData {
  std::string_view cmdline;
  std::optional<GuestRange> initrd;  // from load_initrd
  uint32_t vcpu_count = 1;
};

// What write_boot_data() would refuse: a command line longer than the kernel takes, or
// one holding a NUL.
Status check_boot_data(const LoadedKernel& kernel, const BootData& data);

// The command line, the zero page (64-bit entry) or hvm_start_info (PVH) with the e820
// map of `memory`, the GDT and IDT, the identity page tables (64-bit entry) and the MP
// table. Fails if the command line is longer than the kernel takes or holds a NUL.
Status write_boot_data(GuestMemory& memory, const LoadedKernel& kernel, const BootData& data);

}  // namespace dsec::x86_64

// Register state of the boot vCPU at the kernel's entry point. The other vCPUs stay in
// their reset state; the kernel starts them with INIT and SIPI.
#pragma once

#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/kvm/linux_kvm.h"

namespace dsec::x86_64 {

inline constexpr uint64_t kCr0Pe = 1ULL << 0;
inline constexpr uint64_t kCr0Et = 1ULL << 4;
inline constexpr uint64_t kCr0Pg = 1ULL << 31;
inline constexpr uint64_t kCr4Pae = 1ULL << 5;
inline constexpr uint64_t kEferLme = 1ULL << 8;
inline constexpr uint64_t kEferLma = 1ULL << 10;
inline constexpr uint64_t kRflagsReserved = 1ULL << 1;  // bit 1 always reads as one

// 64-bit entry: rip = entry, rsi = zero page, rsp = rbp = boot stack.
// PVH: rip = entry, rbx = hvm_start_info.
kvm_regs boot_regs(const LoadedKernel& kernel);

// `current` (from KVM_GET_SREGS) with the control registers, descriptor tables and
// segments of the boot GDT that `protocol` enters with; everything else (the APIC base
// above all) is kept.
//   64-bit: CR0.PE|PG, CR4.PAE, EFER.LME|LMA, CR3 = boot page tables, 64-bit code.
//   PVH:    CR0.PE only, paging off, EFER 0, flat 32-bit code and data.
kvm_sregs boot_sregs(BootProtocol protocol, const kvm_sregs& current);

}  // namespace dsec::x86_64

// The rest of a vCPU's boot state, as plain data the builder hands to the vCPU: MSRs,
// FPU, and the LAPIC's LINT0/LINT1 wiring.
#pragma once

#include <cstdint>
#include <vector>

#include "vmm/kvm/linux_kvm.h"

namespace dsec::x86_64 {

inline constexpr uint32_t kMsrTsc = 0x10;
inline constexpr uint32_t kMsrSysenterCs = 0x174;
inline constexpr uint32_t kMsrSysenterEsp = 0x175;
inline constexpr uint32_t kMsrSysenterEip = 0x176;
inline constexpr uint32_t kMsrMiscEnable = 0x1a0;
inline constexpr uint32_t kMsrMtrrDefType = 0x2ff;
inline constexpr uint32_t kMsrStar = 0xc0000081;
inline constexpr uint32_t kMsrLstar = 0xc0000082;
inline constexpr uint32_t kMsrCstar = 0xc0000083;
inline constexpr uint32_t kMsrSyscallMask = 0xc0000084;
inline constexpr uint32_t kMsrKernelGsBase = 0xc0000102;

inline constexpr uint64_t kMiscEnableFastString = 1ULL << 0;
inline constexpr uint64_t kMtrrEnable = 1ULL << 11;
inline constexpr uint64_t kMtrrTypeWriteBack = 6;

// SYSENTER/SYSCALL MSRs and KERNEL_GS_BASE zeroed, TSC 0, fast strings on, and
// write-back as the default memory type with MTRRs enabled (without it the guest would
// run uncached).
std::vector<kvm_msr_entry> boot_msrs();

// fcw 0x37f and mxcsr 0x1f80, the values FNINIT and reset give.
kvm_fpu boot_fpu();

// `lapic` with LINT0 in ExtINT and LINT1 in NMI delivery mode (mask bits kept), as the MP
// table's local interrupt entries describe.
kvm_lapic_state lapic_with_lint_modes(const kvm_lapic_state& lapic);

}  // namespace dsec::x86_64

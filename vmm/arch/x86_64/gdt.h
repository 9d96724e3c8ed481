// The boot GDT, and segment registers that match it. The descriptors are the flat
// segments every x86 VMM boots Linux with.
#pragma once

#include <array>
#include <cstdint>

#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/common/error.h"
#include "vmm/kvm/linux_kvm.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

inline constexpr uint64_t kGdtCode64 = 0x00af9b000000ffff;  // 64-bit code, L=1
inline constexpr uint64_t kGdtCode32 = 0x00cf9b000000ffff;  // 32-bit code, D=1, 4 GiB
inline constexpr uint64_t kGdtData = 0x00cf93000000ffff;    // read/write data, 4 GiB
inline constexpr uint64_t kGdtTss64 = 0x008f8b000000ffff;   // busy TSS
// PVH wants TR to be a busy 32-bit TSS with base 0 and limit 0x67.
inline constexpr uint64_t kGdtTssPvh = 0x00008b0000000067;

inline constexpr uint16_t kCodeSelector = 0x08;
inline constexpr uint16_t kDataSelector = 0x10;
inline constexpr uint16_t kTssSelector = 0x18;

using Gdt = std::array<uint64_t, 4>;

// Null, code (64-bit, or 32-bit for PVH), data, TSS.
Gdt boot_gdt(BootProtocol protocol);

// The segment register contents that loading `selector` from a GDT holding `descriptor`
// would give: base, limit scaled by granularity, and the attribute bits.
kvm_segment segment_from_descriptor(uint64_t descriptor, uint16_t selector);

// Writes `gdt` at kGdtAddr and an empty IDT at kIdtAddr.
Status write_gdt_and_idt(GuestMemory& memory, const Gdt& gdt);

}  // namespace dsec::x86_64

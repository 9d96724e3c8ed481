// The guest-physical layout of an x86-64 microVM, in one place: where the VMM puts boot
// data, where the kernel goes, the 32-bit MMIO gap with its device slots, and the IRQ
// lines. Every address the boot code writes to comes from here.
#pragma once

#include <cstdint>
#include <vector>

#include "guest/init/boot_timer.h"
#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kMiB = 1ULL << 20;
inline constexpr uint64_t kGiB = 1ULL << 30;

// ---- Boot data below 1 MiB. The VMM writes all of it before the first vCPU runs.
// GDT of 4 descriptors (null, code, data, TSS) and an empty IDT right after it.
inline constexpr uint64_t kGdtAddr = 0x500;
inline constexpr uint64_t kGdtEntries = 4;
inline constexpr uint64_t kIdtAddr = 0x520;
// PVH boot: hvm_start_info, its module list (the initrd) and its memory map.
inline constexpr uint64_t kPvhStartInfoAddr = 0x6000;
inline constexpr uint64_t kPvhModlistAddr = 0x6040;
inline constexpr uint64_t kPvhMemmapAddr = 0x6100;
inline constexpr uint64_t kPvhMemmapEnd = 0x7000;
// Linux boot protocol: the zero page (struct boot_params, 4 KiB).
inline constexpr uint64_t kZeroPageAddr = 0x7000;
// Initial stack pointer for the 64-bit Linux entry; the stack grows down through 0x8000.
inline constexpr uint64_t kBootStackPointer = 0x8ff0;
// Identity-mapped page tables for the 64-bit entry: one PML4, one PDPT and one PD of
// 2 MiB pages, mapping [0, kIdentityMapSize).
inline constexpr uint64_t kPml4Addr = 0x9000;
inline constexpr uint64_t kPdptAddr = 0xa000;
inline constexpr uint64_t kPdAddr = 0xb000;
inline constexpr uint64_t kIdentityMapSize = 1 * kGiB;
// Kernel command line, NUL included. Linux on x86 keeps at most COMMAND_LINE_SIZE (2048)
// bytes, NUL included, whatever the boot protocol.
inline constexpr uint64_t kCmdlineAddr = 0x20000;
inline constexpr uint64_t kCmdlineMaxSize = 2048;
// MP table: the floating pointer at the start of the last KiB of base memory (639 KiB),
// one of the places Linux scans for it, the configuration table right after it. It may
// grow up to kHighMemStart; e820 reports [kMpTableAddr, kHighMemStart) as reserved.
inline constexpr uint64_t kMpTableAddr = 0x9fc00;
inline constexpr uint64_t kHighMemStart = 0x100000;
// Kernels load at 1 MiB (bzImage protected-mode code; ELF segments may sit higher).
inline constexpr uint64_t kKernelLoadAddr = kHighMemStart;

// ---- The 32-bit MMIO gap [3 GiB, 4 GiB): no RAM; devices, the IOAPIC and LAPIC, and
// the pages KVM needs for Intel's real-mode emulation.
inline constexpr uint64_t kMmioGapStart = 3 * kGiB;
inline constexpr uint64_t kMmioGapEnd = 4 * kGiB;
// virtio-mmio devices: one 4 KiB slot each from the start of the gap.
inline constexpr uint64_t kVirtioMmioBase = kMmioGapStart;
inline constexpr uint64_t kVirtioMmioSlotSize = 4096;
inline constexpr uint64_t kIoapicAddr = 0xfec00000;
inline constexpr uint64_t kLapicAddr = 0xfee00000;
// KVM_SET_IDENTITY_MAP_ADDR (one page) and KVM_SET_TSS_ADDR (three pages), just below
// the 256 KiB where a BIOS would sit. Reserved in e820.
inline constexpr uint64_t kKvmIdentityMapAddr = 0xfffbc000;
inline constexpr uint64_t kKvmTssAddr = 0xfffbd000;
inline constexpr uint64_t kKvmPrivateEnd = kKvmTssAddr + 3 * kPageSize;

// ---- Interrupt lines (IOAPIC pins; ISA IRQs 0-15 keep their numbers).
inline constexpr uint32_t kIoapicPins = 24;
inline constexpr uint32_t kI8042Irq = 1;
inline constexpr uint32_t kCom1Irq = 4;
// virtio-mmio device i uses IRQ kFirstDeviceIrq + i.
inline constexpr uint32_t kFirstDeviceIrq = 5;
inline constexpr uint32_t kLastDeviceIrq = kIoapicPins - 1;
inline constexpr uint32_t kMaxVirtioMmioDevices = kLastDeviceIrq - kFirstDeviceIrq + 1;

// ---- Port I/O.
inline constexpr uint16_t kCom1Port = 0x3f8;
inline constexpr uint16_t kI8042DataPort = 0x60;
inline constexpr uint16_t kI8042CommandPort = 0x64;
// The boot timer: the guest's init announces userspace and clean reboots here
// (guest/init/boot_timer.h, docs/boot-timer.md).
inline constexpr uint16_t kBootTimerPort = DSEC_BOOT_TIMER_PORT;

// ---- vCPUs: APIC IDs are 8 bits in the MP table and the IOAPIC takes the ID after the
// last vCPU, so 254 is the most the table can describe.
inline constexpr uint32_t kMaxVcpus = 254;

// ---- Guest RAM.
inline constexpr uint64_t kMaxRamBytes = 1ULL << 46;  // 64 TiB

struct VirtioMmioSlot {
  uint64_t address;
  uint32_t irq;
};
// Slot `index` (< kMaxVirtioMmioDevices) of the virtio-mmio area.
constexpr VirtioMmioSlot virtio_mmio_slot(uint32_t index) {
  return {kVirtioMmioBase + index * kVirtioMmioSlotSize, kFirstDeviceIrq + index};
}

// Guest RAM of `ram_bytes` as guest-physical ranges: from 0 up to the MMIO gap, the rest
// from 4 GiB. Fails unless ram_bytes is a multiple of 4 KiB, above 1 MiB and at most
// kMaxRamBytes.
Result<std::vector<GuestRange>> ram_regions(uint64_t ram_bytes);

// End of the RAM that starts at address 0 (below the MMIO gap); 0 if none starts there.
uint64_t low_ram_end(const GuestMemory& memory);

static_assert(kGdtAddr + kGdtEntries * 8 <= kIdtAddr);
static_assert(kPvhMemmapAddr < kPvhMemmapEnd && kPvhMemmapEnd <= kZeroPageAddr);
static_assert(kZeroPageAddr + 4096 <= kBootStackPointer - 0x800);
static_assert(kBootStackPointer < kPml4Addr && kPdAddr + kPageSize <= kCmdlineAddr);
static_assert(kCmdlineAddr + kCmdlineMaxSize <= kMpTableAddr);
static_assert(virtio_mmio_slot(kMaxVirtioMmioDevices - 1).address < kIoapicAddr);
static_assert(kLapicAddr < kKvmIdentityMapAddr && kKvmPrivateEnd <= kMmioGapEnd);

}  // namespace dsec::x86_64

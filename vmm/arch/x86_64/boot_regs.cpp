#include "vmm/arch/x86_64/boot_regs.h"

#include "vmm/arch/x86_64/gdt.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

kvm_regs boot_regs(const LoadedKernel& kernel) {
  kvm_regs regs{};
  regs.rflags = kRflagsReserved;
  regs.rip = kernel.entry;
  if (kernel.protocol == BootProtocol::kPvh) {
    regs.rbx = kPvhStartInfoAddr;
  } else {
    regs.rsp = kBootStackPointer;
    regs.rbp = kBootStackPointer;
    regs.rsi = kZeroPageAddr;
  }
  return regs;
}

kvm_sregs boot_sregs(BootProtocol protocol, const kvm_sregs& current) {
  kvm_sregs sregs = current;
  const Gdt gdt = boot_gdt(protocol);
  sregs.gdt.base = kGdtAddr;
  sregs.gdt.limit = sizeof(gdt) - 1;
  sregs.idt.base = kIdtAddr;
  sregs.idt.limit = sizeof(uint64_t) - 1;
  sregs.cs = segment_from_descriptor(gdt[kCodeSelector / 8], kCodeSelector);
  const kvm_segment data = segment_from_descriptor(gdt[kDataSelector / 8], kDataSelector);
  sregs.ds = data;
  sregs.es = data;
  sregs.fs = data;
  sregs.gs = data;
  sregs.ss = data;
  sregs.tr = segment_from_descriptor(gdt[kTssSelector / 8], kTssSelector);
  if (protocol == BootProtocol::kPvh) {
    sregs.cr0 = kCr0Pe | kCr0Et;
    sregs.cr3 = 0;
    sregs.cr4 = 0;
    sregs.efer = 0;
  } else {
    sregs.cr0 = kCr0Pe | kCr0Et | kCr0Pg;
    sregs.cr3 = kPml4Addr;
    sregs.cr4 = kCr4Pae;
    sregs.efer = kEferLme | kEferLma;
  }
  return sregs;
}

}  // namespace dsec::x86_64

// vCPU registers at the kernel's entry: 64-bit mode with paging for the Linux entry,
// 32-bit protected mode without paging for PVH, segments matching the GDT in memory.
#include <gtest/gtest.h>

#include <array>

#include "tests/support/result_matchers.h"
#include "vmm/arch/x86_64/boot_regs.h"
#include "vmm/arch/x86_64/gdt.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {
namespace {

LoadedKernel kernel_with(BootProtocol protocol, uint64_t entry) {
  LoadedKernel kernel;
  kernel.protocol = protocol;
  kernel.entry = entry;
  return kernel;
}

// kvm_sregs as KVM_GET_SREGS returns it after reset, with the APIC base we must keep.
kvm_sregs reset_sregs() {
  kvm_sregs sregs{};
  sregs.cr0 = 0x60000010;
  sregs.apic_base = 0xfee00900;
  sregs.ldt.type = 2;
  sregs.ldt.present = 1;
  return sregs;
}

void expect_same_segment(const kvm_segment& a, const kvm_segment& b) {
  EXPECT_EQ(a.base, b.base);
  EXPECT_EQ(a.limit, b.limit);
  EXPECT_EQ(a.selector, b.selector);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.present, b.present);
  EXPECT_EQ(a.dpl, b.dpl);
  EXPECT_EQ(a.db, b.db);
  EXPECT_EQ(a.s, b.s);
  EXPECT_EQ(a.l, b.l);
  EXPECT_EQ(a.g, b.g);
  EXPECT_EQ(a.avl, b.avl);
  EXPECT_EQ(a.unusable, b.unusable);
}

TEST(X86BootRegs, DescriptorsDecodeToFlatSegments) {
  const kvm_segment code64 = segment_from_descriptor(kGdtCode64, kCodeSelector);
  EXPECT_EQ(code64.base, 0u);
  EXPECT_EQ(code64.limit, 0xffffffffu);
  EXPECT_EQ(code64.type, 0xb);  // execute/read, accessed
  EXPECT_EQ(code64.s, 1);
  EXPECT_EQ(code64.present, 1);
  EXPECT_EQ(code64.dpl, 0);
  EXPECT_EQ(code64.l, 1);
  EXPECT_EQ(code64.db, 0);
  EXPECT_EQ(code64.g, 1);
  EXPECT_EQ(code64.unusable, 0);

  const kvm_segment code32 = segment_from_descriptor(kGdtCode32, kCodeSelector);
  EXPECT_EQ(code32.l, 0);
  EXPECT_EQ(code32.db, 1);
  EXPECT_EQ(code32.limit, 0xffffffffu);

  const kvm_segment data = segment_from_descriptor(kGdtData, kDataSelector);
  EXPECT_EQ(data.type, 0x3);  // read/write, accessed
  EXPECT_EQ(data.db, 1);
  EXPECT_EQ(data.l, 0);
  EXPECT_EQ(data.s, 1);

  const kvm_segment tss = segment_from_descriptor(kGdtTss64, kTssSelector);
  EXPECT_EQ(tss.type, 0xb);  // busy TSS
  EXPECT_EQ(tss.s, 0);
  EXPECT_EQ(tss.present, 1);

  const kvm_segment pvh_tss = segment_from_descriptor(kGdtTssPvh, kTssSelector);
  EXPECT_EQ(pvh_tss.limit, 0x67u);
  EXPECT_EQ(pvh_tss.g, 0);

  const kvm_segment null = segment_from_descriptor(0, 0);
  EXPECT_EQ(null.unusable, 1);
  const kvm_segment based = segment_from_descriptor(0xab4f9a123456ffffULL, 0x20);
  EXPECT_EQ(based.base, 0xab123456u);
  EXPECT_EQ(based.limit, 0xfffffu);  // G clear: bytes
}

TEST(X86BootRegs, Linux64EntryRunsInLongModeWithPaging) {
  const kvm_sregs sregs = boot_sregs(BootProtocol::kLinux64, reset_sregs());
  EXPECT_EQ(sregs.cr0 & (kCr0Pe | kCr0Pg), kCr0Pe | kCr0Pg);
  EXPECT_EQ(sregs.cr0 & 0x60000000u, 0u) << "caches enabled (CD and NW clear)";
  EXPECT_EQ(sregs.cr3, kPml4Addr);
  EXPECT_EQ(sregs.cr4 & kCr4Pae, kCr4Pae);
  EXPECT_EQ(sregs.efer, kEferLme | kEferLma);
  EXPECT_EQ(sregs.cs.selector, kCodeSelector);
  EXPECT_EQ(sregs.cs.l, 1);
  EXPECT_EQ(sregs.ss.selector, kDataSelector);
  EXPECT_EQ(sregs.tr.selector, kTssSelector);
  EXPECT_EQ(sregs.gdt.base, kGdtAddr);
  EXPECT_EQ(sregs.gdt.limit, 4 * 8 - 1);
  EXPECT_EQ(sregs.idt.base, kIdtAddr);
  // What KVM set up and the boot does not concern, stays.
  EXPECT_EQ(sregs.apic_base, 0xfee00900u);
  EXPECT_EQ(sregs.ldt.type, 2);
}

TEST(X86BootRegs, PvhEntryRunsInProtectedModeWithoutPaging) {
  const kvm_sregs sregs = boot_sregs(BootProtocol::kPvh, reset_sregs());
  EXPECT_EQ(sregs.cr0 & kCr0Pe, kCr0Pe);
  EXPECT_EQ(sregs.cr0 & kCr0Pg, 0u);
  EXPECT_EQ(sregs.cr0 & ~(kCr0Pe | kCr0Et), 0u) << "PE only, as the PVH ABI asks";
  EXPECT_EQ(sregs.cr4, 0u);
  EXPECT_EQ(sregs.efer, 0u);
  EXPECT_EQ(sregs.cs.l, 0);
  EXPECT_EQ(sregs.cs.db, 1);
  EXPECT_EQ(sregs.cs.base, 0u);
  EXPECT_EQ(sregs.cs.limit, 0xffffffffu);
  EXPECT_EQ(sregs.ds.db, 1);
  EXPECT_EQ(sregs.tr.limit, 0x67u);
  EXPECT_EQ(sregs.apic_base, 0xfee00900u);
}

TEST(X86BootRegs, SegmentRegistersMatchTheGdtInGuestMemory) {
  for (const BootProtocol protocol : {BootProtocol::kLinux64, BootProtocol::kPvh}) {
    auto memory = GuestMemory::anonymous(ram_regions(16 * kMiB).value()).value();
    ASSERT_OK(write_gdt_and_idt(memory, boot_gdt(protocol)));
    const kvm_sregs sregs = boot_sregs(protocol, reset_sregs());
    const auto descriptor = [&](uint16_t selector) {
      return memory.read_obj<uint64_t>(sregs.gdt.base + selector).value();
    };
    expect_same_segment(sregs.cs,
                        segment_from_descriptor(descriptor(sregs.cs.selector), sregs.cs.selector));
    for (const kvm_segment* segment : {&sregs.ds, &sregs.es, &sregs.fs, &sregs.gs, &sregs.ss}) {
      expect_same_segment(*segment,
                          segment_from_descriptor(descriptor(kDataSelector), kDataSelector));
    }
    expect_same_segment(sregs.tr,
                        segment_from_descriptor(descriptor(sregs.tr.selector), sregs.tr.selector));
  }
}

TEST(X86BootRegs, Linux64EntryGetsTheZeroPageInRsi) {
  const kvm_regs regs = boot_regs(kernel_with(BootProtocol::kLinux64, 0x100200));
  EXPECT_EQ(regs.rip, 0x100200u);
  EXPECT_EQ(regs.rsi, kZeroPageAddr);
  EXPECT_EQ(regs.rsp, kBootStackPointer);
  EXPECT_EQ(regs.rflags, 0x2u);
}

TEST(X86BootRegs, PvhEntryGetsTheStartInfoInRbx) {
  const kvm_regs regs = boot_regs(kernel_with(BootProtocol::kPvh, 0x1000040));
  EXPECT_EQ(regs.rip, 0x1000040u);
  EXPECT_EQ(regs.rbx, kPvhStartInfoAddr);
  EXPECT_EQ(regs.rflags, 0x2u);
}

}  // namespace
}  // namespace dsec::x86_64

// The register line that ends a VM on a KVM error or triple fault.
#include "vmm/kvm/cpu_state_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vmm/arch/x86_64/gdt.h"

namespace dsec::kvm {
namespace {

using ::testing::HasSubstr;

TEST(CpuStateText, NamesRipControlRegistersAndSegmentsAsTheirDescriptorsRead) {
  kvm_regs regs{};
  regs.rip = 0xffffffff81000000;
  regs.rsp = 0x8ff0;
  regs.rflags = 0x2;
  kvm_sregs sregs{};
  sregs.cr0 = 0x80000011;
  sregs.cr3 = 0x9000;
  sregs.cr4 = 0x20;
  sregs.efer = 0x500;
  sregs.cs = x86_64::segment_from_descriptor(x86_64::kGdtCode64, 0x8);
  sregs.ss = x86_64::segment_from_descriptor(x86_64::kGdtData, 0x10);
  sregs.tr = x86_64::segment_from_descriptor(x86_64::kGdtTss64, 0x18);
  sregs.ldt.unusable = 1;
  sregs.gdt.base = 0x500;
  sregs.gdt.limit = 31;

  const std::string text = describe_cpu_state(regs, sregs);
  EXPECT_THAT(text, HasSubstr("RIP=0xffffffff81000000 RSP=0x8ff0 RFLAGS=0x2 CR0=0x80000011 "
                              "CR2=0x0 CR3=0x9000 CR4=0x20 EFER=0x500"));
  // A segment's attributes read as bits 8-23 of its descriptor: 0xa09b for 64-bit code.
  EXPECT_THAT(text, HasSubstr(" CS=0x8:0x0:0xffffffff:0xa09b "));
  EXPECT_THAT(text, HasSubstr(" SS=0x10:0x0:0xffffffff:0xc093 "));
  EXPECT_THAT(text, HasSubstr(" TR=0x18:0x0:0xffffffff:0x808b "));
  EXPECT_THAT(text, HasSubstr(" LDT=0x0:0x0:0x0:0x0:unusable "));
  EXPECT_THAT(text, HasSubstr(" GDT=0x500:0x1f "));
}

TEST(CpuStateText, TellsTheResetStateFromAnyOther) {
  kvm_regs regs{};
  regs.rip = 0xfff0;
  kvm_sregs sregs{};
  sregs.cr0 = 0x60000010;
  sregs.cs.selector = 0xf000;
  sregs.cs.base = 0xffff0000;
  EXPECT_TRUE(is_reset_state(regs, sregs));
  regs.rip = 0xfff1;  // an INITed vCPU that ran one byte
  EXPECT_FALSE(is_reset_state(regs, sregs));
  regs.rip = 0xfff0;
  sregs.cs.base = 0xf0000;  // a far jump to 0xf000:0xfff0, as a BIOS makes
  EXPECT_FALSE(is_reset_state(regs, sregs));
  sregs.cs.base = 0xffff0000;
  sregs.cr0 |= 1;  // protected mode
  EXPECT_FALSE(is_reset_state(regs, sregs));
}

}  // namespace
}  // namespace dsec::kvm

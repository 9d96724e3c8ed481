// Boot MSRs, FPU and LAPIC LINT wiring handed to each vCPU.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "vmm/arch/x86_64/vcpu_init.h"

namespace dsec::x86_64 {
namespace {

uint32_t lapic_reg(const kvm_lapic_state& lapic, size_t offset) {
  uint32_t value = 0;
  std::memcpy(&value, lapic.regs + offset, sizeof(value));
  return value;
}

void set_lapic_reg(kvm_lapic_state& lapic, size_t offset, uint32_t value) {
  std::memcpy(lapic.regs + offset, &value, sizeof(value));
}

TEST(X86VcpuInit, BootMsrsAreEachSetOnce) {
  std::map<uint32_t, uint64_t> msrs;
  for (const kvm_msr_entry& entry : boot_msrs()) {
    EXPECT_TRUE(msrs.emplace(entry.index, entry.data).second) << std::hex << entry.index;
  }
  const std::map<uint32_t, uint64_t> expected = {
      {0x174, 0},
      {0x175, 0},
      {0x176, 0},  // SYSENTER_CS/ESP/EIP
      {0xc0000081, 0},
      {0xc0000082, 0},
      {0xc0000083, 0},  // STAR, LSTAR, CSTAR
      {0xc0000084, 0},
      {0xc0000102, 0},         // SFMASK, KERNEL_GS_BASE
      {0x10, 0},               // TSC
      {0x1a0, 1},              // MISC_ENABLE: fast strings
      {0x2ff, (1 << 11) | 6},  // MTRR default: enabled, WB
  };
  EXPECT_EQ(msrs, expected);
}

TEST(X86VcpuInit, FpuHasResetControlWords) {
  const kvm_fpu fpu = boot_fpu();
  EXPECT_EQ(fpu.fcw, 0x37f);
  EXPECT_EQ(fpu.mxcsr, 0x1f80u);
  EXPECT_EQ(fpu.fsw, 0);
}

TEST(X86VcpuInit, LintPinsGetExtIntAndNmi) {
  kvm_lapic_state lapic{};
  std::memset(lapic.regs, 0x5a, sizeof(lapic.regs));
  set_lapic_reg(lapic, 0x350, 0x10000);  // reset value: masked, fixed delivery
  set_lapic_reg(lapic, 0x360, 0x10000);
  const kvm_lapic_state result = lapic_with_lint_modes(lapic);
  EXPECT_EQ(lapic_reg(result, 0x350), 0x10700u) << "LINT0: ExtINT";
  EXPECT_EQ(lapic_reg(result, 0x360), 0x10400u) << "LINT1: NMI";
  // Everything else is as it was.
  kvm_lapic_state rest = result;
  set_lapic_reg(rest, 0x350, 0x10000);
  set_lapic_reg(rest, 0x360, 0x10000);
  EXPECT_EQ(std::memcmp(rest.regs, lapic.regs, sizeof(lapic.regs)), 0);
}

}  // namespace
}  // namespace dsec::x86_64

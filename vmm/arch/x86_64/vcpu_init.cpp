#include "vmm/arch/x86_64/vcpu_init.h"

#include <cstring>

namespace dsec::x86_64 {

namespace {

constexpr size_t kApicLvtLint0 = 0x350;
constexpr size_t kApicLvtLint1 = 0x360;
constexpr uint32_t kDeliveryModeMask = 0x7 << 8;
constexpr uint32_t kDeliveryModeNmi = 0x4 << 8;
constexpr uint32_t kDeliveryModeExtInt = 0x7 << 8;

kvm_msr_entry msr(uint32_t index, uint64_t data) {
  kvm_msr_entry entry{};
  entry.index = index;
  entry.data = data;
  return entry;
}

void set_delivery_mode(kvm_lapic_state& lapic, size_t offset, uint32_t mode) {
  uint32_t value = 0;
  std::memcpy(&value, lapic.regs + offset, sizeof(value));
  value = (value & ~kDeliveryModeMask) | mode;
  std::memcpy(lapic.regs + offset, &value, sizeof(value));
}

}  // namespace

std::vector<kvm_msr_entry> boot_msrs() {
  return {
      msr(kMsrSysenterCs, 0),
      msr(kMsrSysenterEsp, 0),
      msr(kMsrSysenterEip, 0),
      msr(kMsrStar, 0),
      msr(kMsrCstar, 0),
      msr(kMsrKernelGsBase, 0),
      msr(kMsrSyscallMask, 0),
      msr(kMsrLstar, 0),
      msr(kMsrTsc, 0),
      msr(kMsrMiscEnable, kMiscEnableFastString),
      msr(kMsrMtrrDefType, kMtrrEnable | kMtrrTypeWriteBack),
  };
}

kvm_fpu boot_fpu() {
  kvm_fpu fpu{};
  fpu.fcw = 0x37f;
  fpu.mxcsr = 0x1f80;
  return fpu;
}

kvm_lapic_state lapic_with_lint_modes(const kvm_lapic_state& lapic) {
  kvm_lapic_state result = lapic;
  set_delivery_mode(result, kApicLvtLint0, kDeliveryModeExtInt);
  set_delivery_mode(result, kApicLvtLint1, kDeliveryModeNmi);
  return result;
}

}  // namespace dsec::x86_64

#include "vmm/kvm/cpu_state_text.h"

#include <fmt/format.h>

#include "vmm/kvm/vcpu.h"

namespace dsec::kvm {
namespace {

uint32_t segment_attributes(const kvm_segment& s) {
  return (uint32_t{s.type} & 0xf) | (uint32_t{s.s} & 1) << 4 | (uint32_t{s.dpl} & 3) << 5 |
         (uint32_t{s.present} & 1) << 7 | (uint32_t{s.avl} & 1) << 12 | (uint32_t{s.l} & 1) << 13 |
         (uint32_t{s.db} & 1) << 14 | (uint32_t{s.g} & 1) << 15;
}

std::string segment_text(const char* name, const kvm_segment& s) {
  return fmt::format(" {}={:#x}:{:#x}:{:#x}:{:#x}{}", name, s.selector, s.base, s.limit,
                     segment_attributes(s), s.unusable != 0 ? ":unusable" : "");
}

}  // namespace

std::string describe_cpu_state(const kvm_regs& regs, const kvm_sregs& sregs) {
  std::string text = fmt::format(
      "RIP={:#x} RSP={:#x} RFLAGS={:#x} CR0={:#x} CR2={:#x} CR3={:#x} CR4={:#x} EFER={:#x}",
      regs.rip, regs.rsp, regs.rflags, sregs.cr0, sregs.cr2, sregs.cr3, sregs.cr4, sregs.efer);
  text += segment_text("CS", sregs.cs);
  text += segment_text("SS", sregs.ss);
  text += segment_text("DS", sregs.ds);
  text += segment_text("TR", sregs.tr);
  text += segment_text("LDT", sregs.ldt);
  text += fmt::format(" GDT={:#x}:{:#x} IDT={:#x}:{:#x}", sregs.gdt.base, sregs.gdt.limit,
                      sregs.idt.base, sregs.idt.limit);
  return text;
}

std::string describe_cpu_state(const Vcpu& vcpu) {
  auto regs = vcpu.get_regs();
  if (!regs) {
    return "registers unreadable: " + regs.error().message();
  }
  auto sregs = vcpu.get_sregs();
  if (!sregs) {
    return "special registers unreadable: " + sregs.error().message();
  }
  return describe_cpu_state(*regs, *sregs);
}

bool is_reset_state(const kvm_regs& regs, const kvm_sregs& sregs) {
  return regs.rip == 0xfff0 && sregs.cs.selector == 0xf000 && sregs.cs.base == 0xffff0000 &&
         (sregs.cr0 & 1) == 0;
}

std::string describe_shutdown_state(const Vcpu& vcpu) {
  auto regs = vcpu.get_regs();
  auto sregs = vcpu.get_sregs();
  if (!regs || !sregs) {
    return describe_cpu_state(vcpu);
  }
  std::string text = describe_cpu_state(*regs, *sregs);
  if (is_reset_state(*regs, *sregs)) {
    text +=
        " (the state of a vCPU just reset: KVM on AMD reinitialises a vCPU that shut down "
        "before reporting it, so where the fault happened is lost)";
  }
  return text;
}

}  // namespace dsec::kvm

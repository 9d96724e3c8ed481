// Where a VM's interrupts stand, as text: each vCPU's (halted or not, interrupts enabled,
// an event KVM is injecting, its local APIC's pending and in-service vectors and timer) and
// the in-kernel IOAPIC's pins. For a guest that seems stuck (`kill -USR1` on `dsec-vmm
// run`): it tells an interrupt the guest never took from one it never got.
#pragma once

#include <string>

#include "vmm/kvm/linux_kvm.h"

namespace dsec::kvm {

class Vcpu;
class Vm;

// "rip 0x... IF=1 halted; lapic tpr 0x0 irr [0x25] isr [] timer tsc-deadline 0xec;
//  injecting irq 0x25" (the last part only when KVM holds an event for the vCPU).
std::string describe_vcpu_interrupts(const kvm_regs& regs, const kvm_mp_state& mp_state,
                                     const kvm_vcpu_events& events,
                                     const kvm_lapic_state& lapic);

// A TSC-deadline timer's state against the vCPU's TSC: "deadline 0x... passed 4600000 TSC
// cycles ago", "... in N TSC cycles", or "disarmed" (deadline 0). A halted vCPU whose
// deadline passed long ago lost a timer interrupt that KVM's local APIC owed it.
std::string describe_tsc_deadline(uint64_t tsc, uint64_t deadline);

// The same as the first, read from `vcpu` (whose thread must be out of KVM_RUN), with the
// deadline in tsc-deadline mode; says what could not be read instead of failing.
std::string describe_vcpu_interrupts(const Vcpu& vcpu);

// "irr 0x0; pin 4 vector 0x24 edge dest 0x0; pin 5 vector 0x25 edge dest 0x1 MASKED; ..."
// for every pin with a vector or not masked (the others, masked and never routed, are
// counted), with remote IRR for a level pin that has it.
std::string describe_ioapic(const kvm_ioapic_state& ioapic);

// The same, read from `vm`'s in-kernel irqchip.
std::string describe_ioapic(const Vm& vm);

}  // namespace dsec::kvm

// A vCPU's registers as one line of text, for the message that ends a VM on a KVM error
// or a triple fault: where the guest was and in what mode.
#pragma once

#include <string>

#include "vmm/kvm/linux_kvm.h"

namespace dsec::kvm {

class Vcpu;

// "RIP=... RSP=... RFLAGS=... CR0=... CR2=... CR3=... CR4=... EFER=... CS=... SS=... TR=..."
// Segments read selector:base:limit:attributes, attributes as in a descriptor's bits 8-23
// (type, S, DPL, P, AVL, L, D/B, G), plus "unusable" when KVM marks them so.
std::string describe_cpu_state(const kvm_regs& regs, const kvm_sregs& sregs);

// The same, read from `vcpu`; says what could not be read instead of failing.
std::string describe_cpu_state(const Vcpu& vcpu);

// Whether these are the registers of a vCPU just reset or INITed (real mode, CS 0xf000 with
// base 0xffff0000, RIP 0xfff0). KVM on AMD reinitialises a vCPU at a shutdown before it
// reports KVM_EXIT_SHUTDOWN, so a triple fault there shows this state, not the fault's.
bool is_reset_state(const kvm_regs& regs, const kvm_sregs& sregs);

// describe_cpu_state(vcpu) for a vCPU that shut down (triple fault), saying so when the
// registers are the reset state and the fault's own are lost.
std::string describe_shutdown_state(const Vcpu& vcpu);

}  // namespace dsec::kvm

// The KVM capabilities dsec-vmm relies on, and a check that reports every missing one at once.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::kvm {

struct Capability {
  int id;                 // KVM_CAP_*
  std::string_view name;  // "KVM_CAP_IRQCHIP"
};

// Every capability the VMM uses: boot (irqchip, PIT, TSS, CPUID), the device model
// (ioeventfd, irqfd) and snapshots (clock, MP state, XSAVE, XCRs, events, debug registers).
std::span<const Capability> required_capabilities();

// Pure over `has`, so it is testable without KVM. Ok when `has` is true for every entry of
// `required`; otherwise one Error that lists all the missing capabilities by name.
Status check_capabilities(std::span<const Capability> required,
                          const std::function<bool(int capability)>& has);

}  // namespace dsec::kvm

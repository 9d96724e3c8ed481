#include "vmm/kvm/capabilities.h"

#include <array>
#include <string>

#include "vmm/kvm/linux_kvm.h"

namespace dsec::kvm {
namespace {

// NOLINTNEXTLINE(cppcoreguidelines-macro-usage): the name must be the constant's spelling.
#define DSEC_KVM_CAP(cap) \
  Capability {            \
    cap, #cap             \
  }

constexpr std::array kRequired = {
    DSEC_KVM_CAP(KVM_CAP_IRQCHIP),        DSEC_KVM_CAP(KVM_CAP_HLT),
    DSEC_KVM_CAP(KVM_CAP_USER_MEMORY),    DSEC_KVM_CAP(KVM_CAP_SET_TSS_ADDR),
    DSEC_KVM_CAP(KVM_CAP_EXT_CPUID),      DSEC_KVM_CAP(KVM_CAP_IOEVENTFD),
    DSEC_KVM_CAP(KVM_CAP_IRQFD),          DSEC_KVM_CAP(KVM_CAP_PIT2),
    DSEC_KVM_CAP(KVM_CAP_IMMEDIATE_EXIT), DSEC_KVM_CAP(KVM_CAP_ADJUST_CLOCK),
    DSEC_KVM_CAP(KVM_CAP_MP_STATE),       DSEC_KVM_CAP(KVM_CAP_XSAVE),
    DSEC_KVM_CAP(KVM_CAP_XCRS),           DSEC_KVM_CAP(KVM_CAP_TSC_DEADLINE_TIMER),
    DSEC_KVM_CAP(KVM_CAP_VCPU_EVENTS),    DSEC_KVM_CAP(KVM_CAP_DEBUGREGS),
    DSEC_KVM_CAP(KVM_CAP_SYNC_MMU),       DSEC_KVM_CAP(KVM_CAP_SET_IDENTITY_MAP_ADDR),
};

#undef DSEC_KVM_CAP

}  // namespace

std::span<const Capability> required_capabilities() {
  return kRequired;
}

Status check_capabilities(std::span<const Capability> required,
                          const std::function<bool(int capability)>& has) {
  std::string missing;
  size_t count = 0;
  for (const Capability& cap : required) {
    if (has(cap.id)) {
      continue;
    }
    if (count++ > 0) {
      missing += ", ";
    }
    missing += cap.name;
  }
  if (count == 0) {
    return ok();
  }
  return fail("the host's KVM lacks " + std::to_string(count) + " capabilit" +
                  (count == 1 ? "y" : "ies") + " dsec-vmm needs: " + missing,
              "run on a host whose kernel (Linux 5.10 or newer) and CPU (VT-x or AMD-V) provide "
              "them, or inside the KVM test bed: tools/kvm-harness -- <command>");
}

}  // namespace dsec::kvm

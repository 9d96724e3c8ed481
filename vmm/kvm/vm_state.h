// The VM-wide KVM state, for snapshots: the PIT, kvmclock, both PICs and the IOAPIC.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/kvm/linux_kvm.h"

namespace dsec::kvm {

class Vm;

struct VmState {
  kvm_pit_state2 pit{};
  kvm_clock_data clock{};
  kvm_irqchip pic_master{};
  kvm_irqchip pic_slave{};
  kvm_irqchip ioapic{};
};

// Reads the state of `vm` (in-kernel irqchip and PIT2 created), in the order PIT2, clock,
// PIC master, PIC slave, IOAPIC. Take it after the vCPUs' state.
Result<VmState> capture(const Vm& vm);

// Writes `state` into `vm` in the same order. Call it after the vCPUs are restored and
// before the devices: a device's interrupt must not be overwritten by older irqchip state.
// The clock advances by the wall time since the snapshot where both the saved clock and
// this host's KVM have KVM_CLOCK_REALTIME; otherwise it resumes from snapshot time.
Status restore(Vm& vm, const VmState& state);

// Pure, for tests: what restore() passes to KVM_SET_CLOCK for `saved`, given whether this
// host's KVM_CAP_ADJUST_CLOCK includes KVM_CLOCK_REALTIME.
kvm_clock_data clock_to_restore(const kvm_clock_data& saved, bool host_has_realtime);

std::vector<uint8_t> encode(const VmState& state);
// Fails, never crashes, on truncated or trailing input, or on irqchips saved under the
// wrong chip ids.
Result<VmState> decode_vm_state(std::span<const uint8_t> bytes);

}  // namespace dsec::kvm

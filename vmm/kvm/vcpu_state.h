// A vCPU's whole KVM state, for snapshots: captured from a paused vCPU, restored into a
// fresh one, and encoded as a snapshot section's contents (vmm/snapshot/byte_codec.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/kvm/linux_kvm.h"

namespace dsec::kvm {

class Vcpu;

struct VcpuState {
  kvm_mp_state mp_state{};
  kvm_regs regs{};
  kvm_sregs sregs{};
  std::vector<uint8_t> xsave;  // the XSAVE area, as KVM_GET_XSAVE2 gives it (>= 4096 bytes)
  kvm_xcrs xcrs{};
  kvm_debugregs debugregs{};
  kvm_lapic_state lapic{};
  uint32_t tsc_khz = 0;  // 0: KVM did not know the rate
  std::vector<kvm_cpuid_entry2> cpuid;
  std::vector<kvm_msr_entry> msrs;
  kvm_vcpu_events events{};
};

// Bounds decode() enforces: more than any real vCPU has, small enough that a hostile
// state file cannot make the VMM allocate much.
inline constexpr size_t kMaxSnapshotCpuidEntries = 256;
inline constexpr size_t kMaxSnapshotMsrs = 1024;
inline constexpr size_t kMaxSnapshotXsaveBytes = size_t{64} * 1024;

// Reads the state of `vcpu`, which must be out of KVM_RUN with no I/O pending (re-enter
// KVM_RUN with immediate_exit first), in Firecracker's order: MP_STATE first (it makes
// KVM take pending APIC events), then regs, sregs, XSAVE, XCRS, debug registers, LAPIC,
// TSC rate, CPUID, MSRs, and VCPU_EVENTS last. MSRs of `msr_indices` (usually
// snapshot_msr_indices()) that this vCPU cannot read are left out, named in a debug log.
Result<VcpuState> capture(const Vcpu& vcpu, std::span<const uint32_t> msr_indices);

// Writes `state` into `vcpu`, created but not yet run, in the order KVM needs: CPUID2,
// MP_STATE, REGS, SREGS, XSAVE, XCRS, DEBUGREGS, LAPIC (after SREGS, which holds the APIC
// base; before the MSRs, since the TSC deadline needs the LAPIC), MSRs with the TSC
// deadline alone in a last call after IA32_TSC, VCPU_EVENTS (after REGS, which clears
// pending exceptions), then KVMCLOCK_CTRL. First, a TSC rate that differs from
// `host_tsc_khz` (a fresh vCPU's get_tsc_khz()) by more than 250 ppm is set with
// KVM_SET_TSC_KHZ where KVM can scale it, and refused otherwise.
Status restore(Vcpu& vcpu, const VcpuState& state, uint32_t host_tsc_khz);

// Pure, for tests: the TSC rate restore() must set for a snapshot taken at `saved_khz` on
// a host running at `host_khz` (nullopt: none, within 250 ppm or a rate unknown), or the
// error when KVM cannot scale.
Result<std::optional<uint32_t>> tsc_khz_to_set(uint32_t saved_khz, uint32_t host_khz,
                                               bool kvm_can_scale);

// The MSRs restore() writes, in two calls: every MSR but the TSC deadline, then the
// deadline; a saved deadline of 0 becomes the saved IA32_TSC (Firecracker issue 4618: a
// deadline of 0 can leave a guest task asleep forever), so the timer fires at once.
struct MsrRestorePlan {
  std::vector<kvm_msr_entry> first;
  std::vector<kvm_msr_entry> last;  // the TSC deadline, or nothing
};
MsrRestorePlan plan_msr_restore(std::span<const kvm_msr_entry> saved);

// The encoding: each struct byte for byte, the arrays with counts (vmm/snapshot/byte_codec.h).
std::vector<uint8_t> encode(const VcpuState& state);
// Fails, never crashes, on truncated, oversized or trailing input.
Result<VcpuState> decode_vcpu_state(std::span<const uint8_t> bytes);

}  // namespace dsec::kvm

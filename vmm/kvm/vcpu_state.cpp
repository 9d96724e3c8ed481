#include "vmm/kvm/vcpu_state.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/kvm/snapshot_msrs.h"
#include "vmm/kvm/vcpu.h"

namespace dsec::kvm {
namespace {

// Firecracker's tolerance: rates closer than this count as the same clock.
constexpr uint64_t kTscTolerancePpm = 250;

// The MSRs of `indices` that `vcpu` can read. KVM_GET_MSRS stops at the first MSR it
// cannot read (one the host lacks, or one tied to a feature the vCPU's CPUID does not
// have): skip it and read on from the next.
Result<std::vector<kvm_msr_entry>> readable_msrs(const Vcpu& vcpu,
                                                 std::span<const uint32_t> indices) {
  std::vector<kvm_msr_entry> msrs;
  msrs.reserve(indices.size());
  size_t next = 0;
  while (next < indices.size()) {
    const auto read = DSEC_TRY(vcpu.read_msrs(indices.subspan(next)));
    msrs.insert(msrs.end(), read.begin(), read.end());
    next += read.size();
    if (next < indices.size()) {
      spdlog::debug("vcpu {}: MSR {:#x} cannot be read; the snapshot leaves it out", vcpu.id(),
                    indices[next]);
      ++next;
    }
  }
  return msrs;
}

// A capture the decoder would refuse must fail now, not when the snapshot is restored.
Status check_fits(const char* what, size_t count, size_t max) {
  if (count > max) {
    return fail(
        fmt::format("the vCPU has {} {}, more than the {} a snapshot holds", count, what, max),
        "this host's KVM is newer than this dsec-vmm: report it");
  }
  return ok();
}

}  // namespace

Result<VcpuState> capture(const Vcpu& vcpu, std::span<const uint32_t> msr_indices) {
  VcpuState state;
  state.mp_state = DSEC_TRY(vcpu.get_mp_state());
  state.regs = DSEC_TRY(vcpu.get_regs());
  state.sregs = DSEC_TRY(vcpu.get_sregs());
  state.xsave = DSEC_TRY(vcpu.get_xsave_area());
  state.xcrs = DSEC_TRY(vcpu.get_xcrs());
  state.debugregs = DSEC_TRY(vcpu.get_debugregs());
  state.lapic = DSEC_TRY(vcpu.get_lapic());
  state.tsc_khz = DSEC_TRY(vcpu.get_tsc_khz());
  state.cpuid = DSEC_TRY(vcpu.get_cpuid2());
  state.msrs = DSEC_TRY(readable_msrs(vcpu, msr_indices));
  state.events = DSEC_TRY(vcpu.get_vcpu_events());
  DSEC_TRY(check_fits("bytes of XSAVE state", state.xsave.size(), kMaxSnapshotXsaveBytes));
  DSEC_TRY(check_fits("CPUID entries", state.cpuid.size(), kMaxSnapshotCpuidEntries));
  DSEC_TRY(check_fits("MSRs", state.msrs.size(), kMaxSnapshotMsrs));
  return state;
}

Result<std::optional<uint32_t>> tsc_khz_to_set(uint32_t saved_khz, uint32_t host_khz,
                                               bool kvm_can_scale) {
  if (saved_khz == 0 || host_khz == 0) {
    return std::nullopt;
  }
  const uint64_t difference = saved_khz > host_khz ? saved_khz - host_khz : host_khz - saved_khz;
  if (difference * 1'000'000 <= kTscTolerancePpm * host_khz) {
    return std::nullopt;
  }
  if (!kvm_can_scale) {
    return fail(fmt::format("snapshot taken on a host whose TSC runs at {} kHz; this host's "
                            "runs at {} kHz and KVM cannot scale it",
                            saved_khz, host_khz),
                "restore on a host with the same TSC frequency, or on one whose CPU can scale "
                "a guest's TSC (KVM_CAP_TSC_CONTROL)");
  }
  return saved_khz;
}

MsrRestorePlan plan_msr_restore(std::span<const kvm_msr_entry> saved) {
  MsrRestorePlan plan;
  std::optional<uint64_t> tsc;
  for (const kvm_msr_entry& entry : saved) {
    if (entry.index == kMsrIa32TscDeadline) {
      plan.last.push_back(entry);
    } else {
      plan.first.push_back(entry);
    }
    if (entry.index == kMsrIa32Tsc) {
      tsc = entry.data;
    }
  }
  for (kvm_msr_entry& deadline : plan.last) {
    if (deadline.data == 0 && tsc) {
      deadline.data = *tsc;
    }
  }
  return plan;
}

Status restore(Vcpu& vcpu, const VcpuState& state, uint32_t host_tsc_khz) {
  // The rate first: KVM converts the IA32_TSC written below with it.
  const auto khz = DSEC_TRY(tsc_khz_to_set(state.tsc_khz, host_tsc_khz, vcpu.can_scale_tsc()));
  if (khz) {
    DSEC_TRY(vcpu.set_tsc_khz(*khz));
  }
  DSEC_TRY(vcpu.set_cpuid2(state.cpuid));
  DSEC_TRY(vcpu.set_mp_state(state.mp_state));
  DSEC_TRY(vcpu.set_regs(state.regs));
  DSEC_TRY(vcpu.set_sregs(state.sregs));
  DSEC_TRY(vcpu.set_xsave_area(state.xsave));
  DSEC_TRY(vcpu.set_xcrs(state.xcrs));
  DSEC_TRY(vcpu.set_debugregs(state.debugregs));
  DSEC_TRY(vcpu.set_lapic(state.lapic));
  // The deadline in its own call after IA32_TSC, which it is compared with (Firecracker
  // issue 4099). KVM before Linux 6.6 takes an IA32_TSC write within a second of the TSC
  // it expects as a sync between vCPUs and keeps its own value: in a fresh VM, a TSC saved
  // less than about a second after the guest's TSC started restarts near 0 (kvmclock,
  // restored with the VM's clock, does not go back).
  const MsrRestorePlan msrs = plan_msr_restore(state.msrs);
  DSEC_TRY(vcpu.set_msrs(msrs.first));
  DSEC_TRY(vcpu.set_msrs(msrs.last));
  // KVM_GET_VCPU_EVENTS reports a pending NMI but does not flag it valid; without the
  // flag KVM_SET_VCPU_EVENTS drops it. (SIPI_VECTOR stays unflagged: GET always reports
  // it as 0.)
  kvm_vcpu_events events = state.events;
  events.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING;
  DSEC_TRY(vcpu.set_vcpu_events(events));
  return vcpu.kvmclock_ctrl();
}

}  // namespace dsec::kvm

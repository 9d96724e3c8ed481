// Which MSRs a vCPU snapshot saves: the ones KVM reports (KVM_GET_MSR_INDEX_LIST) that are
// guest state, plus the MTRRs, which KVM emulates for every vCPU but does not list.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::kvm {

class KvmSystem;

inline constexpr uint32_t kMsrIa32Tsc = 0x10;
inline constexpr uint32_t kMsrIa32TscDeadline = 0x6e0;

// Pure, for tests: the entries of `kvm_list` that are state, in its order without
// duplicates, then the unlisted MTRRs that it lacks. kvm_list is KVM_GET_MSR_INDEX_LIST:
// the MSRs KVM saves for QEMU (msrs_to_save) and the ones it emulates (emulated_msrs, the
// KVM range included); KVM_GET_MSR_FEATURE_INDEX_LIST is a different list, of read-only
// capability MSRs, which are configuration rather than state.
std::vector<uint32_t> select_snapshot_msrs(std::span<const uint32_t> kvm_list);

// select_snapshot_msrs() of this host's KVM_GET_MSR_INDEX_LIST. A vCPU may still refuse to
// read some of them (one its CPUID or the host lacks): capture() leaves those out.
Result<std::vector<uint32_t>> snapshot_msr_indices(const KvmSystem& kvm);

}  // namespace dsec::kvm

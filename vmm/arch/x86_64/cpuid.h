// Per-vCPU CPUID: KVM_GET_SUPPORTED_CPUID's table, fixed up so that each vCPU sees its own
// APIC ID, a topology of n threads in one package (one thread per core, or two with SMT, as
// Firecracker's "smt" makes them), and a KVM hypervisor.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/kvm/linux_kvm.h"

namespace dsec::x86_64 {

struct VcpuCpuidConfig {
  uint32_t vcpu_index = 0;  // also its APIC ID
  uint32_t vcpu_count = 1;
  // KVM emulates the TSC-deadline timer but reports it through KVM_CAP_TSC_DEADLINE_TIMER,
  // not in the supported CPUID.
  bool tsc_deadline_timer = false;
  // 2: vCPUs 2k and 2k+1 are the two threads of core k (Firecracker's smt, which needs an
  // even count); 1: each vCPU is a core. A single vCPU is a core either way.
  uint32_t threads_per_core = 1;
};

inline constexpr uint32_t kCpuidHypervisorBit = 1U << 31;      // leaf 1 ECX
inline constexpr uint32_t kCpuidTscDeadlineBit = 1U << 24;     // leaf 1 ECX
inline constexpr uint32_t kCpuidHyperThreadingBit = 1U << 28;  // leaf 1 EDX
inline constexpr uint32_t kCpuidVmxBit = 1U << 5;              // leaf 1 ECX (Intel VT-x)
inline constexpr uint32_t kCpuidSvmBit = 1U << 2;              // leaf 0x80000001 ECX (AMD-V)
inline constexpr uint32_t kCpuidTopoExtBit = 1U << 22;         // leaf 0x80000001 ECX (AMD)
inline constexpr uint32_t kCpuidSvmFeaturesLeaf = 0x8000000a;  // AMD-V's revision and features

// Fixes up, for vCPU `config.vcpu_index` of `config.vcpu_count`:
//   leaf 1: initial APIC ID, addressable logical processors, HTT, hypervisor and
//     TSC-deadline bits; VMX cleared;
//   leaves 0x80000001 and 0x8000000A (AMD): SVM cleared, its feature leaf zeroed. A sandbox
//     gets no nested virtualization: without the CPUID bit KVM refuses the guest's
//     CR4.VMXE / EFER.SVME, so the host's nested-virtualization code stays out of its reach;
//   leaf 4: cores per package and the threads sharing each cache;
//   leaves 0xB and 0x1F (where present): x2APIC ID, threads per core, n threads in all;
//   leaves 0x80000008 ECX and 0x8000001E (AMD, where present): core count and IDs; with
//     two threads per core, TOPOEXT in 0x80000001 ECX, without which Linux reads no
//     threads from 0x8000001E (nor from 0xB) on AMD, as Firecracker sets it;
//   leaves 0x40000000/0x40000001: the "KVMKVMKVM" signature and, if KVM did not list
//     them, the kvmclock features.
// Fails for an index outside [0, count), a count above kMaxVcpus, or two threads per core
// with an odd count above 1.
Result<std::vector<kvm_cpuid_entry2>> vcpu_cpuid(std::span<const kvm_cpuid_entry2> supported,
                                                 const VcpuCpuidConfig& config);

}  // namespace dsec::x86_64

#include "vmm/arch/x86_64/cpuid.h"

#include <asm/kvm_para.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

// "KVMKVMKVM\0\0\0" in EBX, ECX, EDX.
constexpr uint32_t kKvmSignatureEbx = 0x4b4d564b;
constexpr uint32_t kKvmSignatureEcx = 0x564b4d56;
constexpr uint32_t kKvmSignatureEdx = 0x0000004d;
constexpr uint32_t kKvmclockFeatures = (1U << KVM_FEATURE_CLOCKSOURCE) |
                                       (1U << KVM_FEATURE_CLOCKSOURCE2) |
                                       (1U << KVM_FEATURE_CLOCKSOURCE_STABLE_BIT);
// Topology leaves 0xB/0x1F: level types in ECX[15:8].
constexpr uint32_t kLevelSmt = 1;
constexpr uint32_t kLevelCore = 2;

// Bits of APIC ID that count n cores: ceil(log2(n)).
uint32_t id_bits(uint32_t n) {
  return static_cast<uint32_t>(std::bit_width(n - 1));
}

kvm_cpuid_entry2* find(std::vector<kvm_cpuid_entry2>& entries, uint32_t function,
                       uint32_t index = 0) {
  for (kvm_cpuid_entry2& entry : entries) {
    if (entry.function == function && entry.index == index) {
      return &entry;
    }
  }
  return nullptr;
}

kvm_cpuid_entry2 make_entry(uint32_t function, uint32_t index, uint32_t flags, uint32_t eax,
                            uint32_t ebx, uint32_t ecx, uint32_t edx) {
  kvm_cpuid_entry2 entry{};
  entry.function = function;
  entry.index = index;
  entry.flags = flags;
  entry.eax = eax;
  entry.ebx = ebx;
  entry.ecx = ecx;
  entry.edx = edx;
  return entry;
}

// Leaves 0xB and 0x1F: whatever levels the host listed, the guest gets SMT (`threads` per
// core), core (n threads in the package) and the terminating invalid level, each with the
// x2APIC ID in EDX.
void replace_topology_leaf(std::vector<kvm_cpuid_entry2>& entries, uint32_t leaf, uint32_t apic_id,
                           uint32_t n, uint32_t threads) {
  const auto removed = std::erase_if(
      entries, [leaf](const kvm_cpuid_entry2& entry) { return entry.function == leaf; });
  if (removed == 0) {
    return;
  }
  constexpr uint32_t kFlags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
  entries.push_back(
      make_entry(leaf, 0, kFlags, id_bits(threads), threads, kLevelSmt << 8, apic_id));
  entries.push_back(make_entry(leaf, 1, kFlags, id_bits(n), n, (kLevelCore << 8) | 1, apic_id));
  entries.push_back(make_entry(leaf, 2, kFlags, 0, 0, 2, apic_id));
}

}  // namespace

Result<std::vector<kvm_cpuid_entry2>> vcpu_cpuid(std::span<const kvm_cpuid_entry2> supported,
                                                 const VcpuCpuidConfig& config) {
  const uint32_t n = config.vcpu_count;
  const uint32_t apic_id = config.vcpu_index;
  if (n == 0 || n > kMaxVcpus || apic_id >= n) {
    return fail(
        fmt::format("CPUID for vCPU {} of {}: need 1 to {} vCPUs and an index below the "
                    "count",
                    apic_id, n, kMaxVcpus));
  }
  if ((config.threads_per_core != 1 && config.threads_per_core != 2) ||
      (config.threads_per_core == 2 && n > 1 && n % 2 != 0)) {
    return fail(fmt::format("CPUID for {} vCPUs: {} threads per core does not fit", n,
                            config.threads_per_core),
                "give 1 thread per core, or 2 with an even vCPU count");
  }
  // The APIC ID's low bit is the thread's number in its core (Intel SDM 10.12.4's layout).
  const uint32_t threads = n > 1 ? config.threads_per_core : 1;
  std::vector<kvm_cpuid_entry2> entries(supported.begin(), supported.end());
  const bool amd_topology = find(entries, 0x8000001e) != nullptr;

  for (kvm_cpuid_entry2& entry : entries) {
    switch (entry.function) {
      case 1: {
        // EBX[31:24] initial APIC ID, [23:16] addressable logical processor IDs (a power of
        // two), [15:0] kept (CLFLUSH line size, brand index).
        const uint32_t addressable = std::min<uint32_t>(std::bit_ceil(n), 0xff);
        entry.ebx = (entry.ebx & 0xffff) | (addressable << 16) | (apic_id << 24);
        entry.ecx |= kCpuidHypervisorBit;
        entry.ecx &= ~kCpuidVmxBit;
        if (config.tsc_deadline_timer) {
          entry.ecx |= kCpuidTscDeadlineBit;
        } else {
          entry.ecx &= ~kCpuidTscDeadlineBit;
        }
        if (n > 1) {
          entry.edx |= kCpuidHyperThreadingBit;
        } else {
          entry.edx &= ~kCpuidHyperThreadingBit;
        }
        break;
      }
      case 4: {
        // Deterministic cache parameters; a cache type of 0 ends the list.
        if ((entry.eax & 0x1f) == 0) {
          break;
        }
        const uint32_t level = (entry.eax >> 5) & 0x7;
        // L1/L2 per core (its threads share them), L3 per package.
        const uint32_t sharing = level >= 3 ? n - 1 : threads - 1;
        entry.eax &= ~((0x3fU << 26) | (0xfffU << 14));
        entry.eax |= (std::min<uint32_t>(n / threads - 1, 0x3f) << 26) | (sharing << 14);
        break;
      }
      case 0x80000001:
        entry.ecx &= ~kCpuidSvmBit;
        if (threads > 1 && amd_topology) {
          entry.ecx |= kCpuidTopoExtBit;
        }
        break;
      case kCpuidSvmFeaturesLeaf:
        entry.eax = entry.ebx = entry.ecx = entry.edx = 0;
        break;
      case 0x80000008:
        // ECX[7:0] cores - 1, [15:12] APIC ID bits for the core number.
        entry.ecx = (entry.ecx & ~0xf0ffU) | (n - 1) | (id_bits(n) << 12);
        break;
      case 0x8000001e:
        // Extended APIC ID; compute unit (core) ID and its threads less one; node 0 of 1.
        entry.eax = apic_id;
        entry.ebx = (entry.ebx & ~0xffffU) | ((threads - 1) << 8) | (apic_id / threads);
        entry.ecx &= ~0x7ffU;
        break;
      default:
        break;
    }
  }
  replace_topology_leaf(entries, 0xb, apic_id, n, threads);
  replace_topology_leaf(entries, 0x1f, apic_id, n, threads);

  // KVM lists its paravirtual leaves in the supported table since Linux 2.6.3x; add them
  // where it did not, with the kvmclock features every KVM has.
  if (kvm_cpuid_entry2* signature = find(entries, KVM_CPUID_SIGNATURE)) {
    signature->eax = std::max<uint32_t>(signature->eax, KVM_CPUID_FEATURES);
    signature->ebx = kKvmSignatureEbx;
    signature->ecx = kKvmSignatureEcx;
    signature->edx = kKvmSignatureEdx;
  } else {
    entries.push_back(make_entry(KVM_CPUID_SIGNATURE, 0, 0, KVM_CPUID_FEATURES, kKvmSignatureEbx,
                                 kKvmSignatureEcx, kKvmSignatureEdx));
  }
  if (find(entries, KVM_CPUID_FEATURES) == nullptr) {
    entries.push_back(make_entry(KVM_CPUID_FEATURES, 0, 0, kKvmclockFeatures, 0, 0, 0));
  }
  return entries;
}

}  // namespace dsec::x86_64

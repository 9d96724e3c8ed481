// Per-vCPU CPUID from a KVM_GET_SUPPORTED_CPUID-like table.
#include <asm/kvm_para.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/arch/x86_64/cpuid.h"

namespace dsec::x86_64 {
namespace {

using ::testing::HasSubstr;

kvm_cpuid_entry2 entry(uint32_t function, uint32_t index, uint32_t eax, uint32_t ebx, uint32_t ecx,
                       uint32_t edx, uint32_t flags = 0) {
  kvm_cpuid_entry2 e{};
  e.function = function;
  e.index = index;
  e.flags = flags;
  e.eax = eax;
  e.ebx = ebx;
  e.ecx = ecx;
  e.edx = edx;
  return e;
}

constexpr uint32_t kIndexed = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;

// What KVM reports on an Intel host with 2 threads per core, 8 cores: the host's APIC ID
// (5) and topology leak through and must not reach the guest.
std::vector<kvm_cpuid_entry2> intel_host(bool with_kvm_leaves) {
  std::vector<kvm_cpuid_entry2> table = {
      entry(0, 0, 0x1f, 0x756e6547, 0x6c65746e, 0x49656e69),
      entry(1, 0, 0x000906ea, (5u << 24) | (16u << 16) | (8u << 8), 0x77fafbff & ~(1u << 24),
            0x1f8bfbff | (1u << 28)),
      entry(4, 0, 0x1c004121, 0x01c0003f, 0x3f, 0, kIndexed),    // L1d
      entry(4, 1, 0x1c004122, 0x01c0003f, 0x3f, 0, kIndexed),    // L1i
      entry(4, 2, 0x1c004143, 0x00c0003f, 0x3ff, 0, kIndexed),   // L2
      entry(4, 3, 0x1c03c163, 0x03c0003f, 0x2fff, 6, kIndexed),  // L3
      entry(4, 4, 0, 0, 0, 0, kIndexed),
      entry(7, 0, 0, 0x029c6fbf, 0x40000000, 0xbc000400, kIndexed),
      entry(0xb, 0, 1, 2, 0x100, 5, kIndexed),
      entry(0xb, 1, 4, 16, 0x201, 5, kIndexed),
      entry(0x1f, 0, 1, 2, 0x100, 5, kIndexed),
      entry(0x1f, 1, 4, 16, 0x201, 5, kIndexed),
      entry(0x1f, 2, 6, 32, 0x502, 5, kIndexed),  // a die level the guest does not have
      entry(0x1f, 3, 0, 0, 0x3, 5, kIndexed),
      entry(0x80000008, 0, 0x3027, 0, 0, 0),
  };
  if (with_kvm_leaves) {
    table.push_back(
        entry(KVM_CPUID_SIGNATURE, 0, KVM_CPUID_FEATURES, 0x4b4d564b, 0x564b4d56, 0x4d));
    table.push_back(entry(KVM_CPUID_FEATURES, 0, 0x01007efb, 0, 0, 0));
  }
  return table;
}

std::vector<kvm_cpuid_entry2> amd_host() {
  return {
      entry(0, 0, 0x10, 0x68747541, 0x444d4163, 0x69746e65),
      entry(1, 0, 0x00a20f10, (3u << 24) | (16u << 16) | (8u << 8), 0x7ed8320b, 0x178bfbff),
      entry(0x80000001, 0, 0x00a20f10, 0, 0x75c237ff, 0x2fd3fbff),  // SVM (ECX bit 2) among them
      entry(0x8000000a, 0, 1, 0x8000, 0, 0x1ebfbcff),               // its revision, ASIDs, NPT...
      entry(0x80000008, 0, 0x3030, 0, 0x700f, 0),
      entry(0x8000001e, 0, 3, 0x101, 0, 0),
  };
}

std::vector<const kvm_cpuid_entry2*> find_all(const std::vector<kvm_cpuid_entry2>& table,
                                              uint32_t function) {
  std::vector<const kvm_cpuid_entry2*> found;
  for (const auto& e : table) {
    if (e.function == function) {
      found.push_back(&e);
    }
  }
  return found;
}

const kvm_cpuid_entry2& find(const std::vector<kvm_cpuid_entry2>& table, uint32_t function,
                             uint32_t index = 0) {
  for (const auto& e : table) {
    if (e.function == function && e.index == index) {
      return e;
    }
  }
  ADD_FAILURE() << "no leaf " << std::hex << function << " index " << index;
  static const kvm_cpuid_entry2 kNone{};
  return kNone;
}

std::vector<kvm_cpuid_entry2> cpuid_for(const std::vector<kvm_cpuid_entry2>& host, uint32_t index,
                                        uint32_t count, bool tsc_deadline = false) {
  return vcpu_cpuid(host, {index, count, tsc_deadline, 1}).value();
}

TEST(X86Cpuid, EachVcpuSeesItsOwnApicId) {
  const auto host = intel_host(true);
  for (uint32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const auto table = cpuid_for(host, i, 4);
    EXPECT_EQ(find(table, 1).ebx >> 24, i);
    for (const uint32_t leaf : {0xbu, 0x1fu}) {
      for (const kvm_cpuid_entry2* e : find_all(table, leaf)) {
        EXPECT_EQ(e->edx, i) << "x2APIC ID in leaf " << leaf << " subleaf " << e->index;
      }
    }
  }
}

TEST(X86Cpuid, Leaf1CountsLogicalProcessorsAndKeepsTheRest) {
  const auto host = intel_host(true);
  const auto three = cpuid_for(host, 0, 3);
  const kvm_cpuid_entry2& leaf1 = find(three, 1);
  EXPECT_EQ((leaf1.ebx >> 16) & 0xff, 4u) << "3 vCPUs need 4 addressable IDs";
  EXPECT_EQ((leaf1.ebx >> 8) & 0xff, 8u) << "CLFLUSH line size kept";
  EXPECT_NE(leaf1.edx & kCpuidHyperThreadingBit, 0u);
  EXPECT_EQ(leaf1.eax, find(host, 1).eax);

  const auto one = cpuid_for(host, 0, 1);
  EXPECT_EQ((find(one, 1).ebx >> 16) & 0xff, 1u);
  EXPECT_EQ(find(one, 1).edx & kCpuidHyperThreadingBit, 0u);
}

TEST(X86Cpuid, HypervisorBitIsSetAndTscDeadlineFollowsKvm) {
  const auto host = intel_host(true);
  EXPECT_NE(find(cpuid_for(host, 0, 1), 1).ecx & kCpuidHypervisorBit, 0u);
  EXPECT_EQ(find(cpuid_for(host, 0, 1, false), 1).ecx & kCpuidTscDeadlineBit, 0u);
  EXPECT_NE(find(cpuid_for(host, 0, 1, true), 1).ecx & kCpuidTscDeadlineBit, 0u);
}

TEST(X86Cpuid, TopologyLeavesDescribeSingleThreadCores) {
  const auto table = cpuid_for(intel_host(true), 2, 6);
  for (const uint32_t leaf : {0xbu, 0x1fu}) {
    SCOPED_TRACE(leaf);
    ASSERT_EQ(find_all(table, leaf).size(), 3u) << "the host's die level is gone";
    const kvm_cpuid_entry2& smt = find(table, leaf, 0);
    EXPECT_EQ(smt.eax, 0u) << "no bits for threads";
    EXPECT_EQ(smt.ebx, 1u) << "one thread per core";
    EXPECT_EQ(smt.ecx, 0x100u) << "level 0, type SMT";
    const kvm_cpuid_entry2& core = find(table, leaf, 1);
    EXPECT_EQ(core.eax, 3u) << "6 cores need 3 bits of APIC ID";
    EXPECT_EQ(core.ebx, 6u);
    EXPECT_EQ(core.ecx, 0x201u) << "level 1, type core";
    const kvm_cpuid_entry2& end = find(table, leaf, 2);
    EXPECT_EQ(end.ebx, 0u);
    EXPECT_EQ(end.ecx, 2u) << "level 2, type invalid";
    for (uint32_t index = 0; index < 3; ++index) {
      EXPECT_EQ(find(table, leaf, index).flags, kIndexed);
    }
  }
}

TEST(X86Cpuid, TopologyLeavesTheHostLacksAreNotInvented) {
  const auto table = cpuid_for(amd_host(), 0, 2);
  EXPECT_TRUE(find_all(table, 0xb).empty());
  EXPECT_TRUE(find_all(table, 0x1f).empty());
}

TEST(X86Cpuid, CacheLeafCountsCoresAndSharing) {
  const auto table = cpuid_for(intel_host(true), 0, 4);
  for (uint32_t index = 0; index < 4; ++index) {
    SCOPED_TRACE(index);
    const kvm_cpuid_entry2& cache = find(table, 4, index);
    EXPECT_EQ(cache.eax >> 26, 3u) << "4 cores per package";
    const uint32_t level = (cache.eax >> 5) & 7;
    EXPECT_EQ((cache.eax >> 14) & 0xfff, level == 3 ? 3u : 0u)
        << "L3 shared by all, L1/L2 per core";
    EXPECT_EQ(cache.eax & 0x3fff, find(intel_host(true), 4, index).eax & 0x3fff) << "type kept";
  }
  EXPECT_EQ(find(table, 4, 4).eax, 0u) << "terminating entry untouched";
}

TEST(X86Cpuid, AmdLeavesCountCores) {
  const auto table = cpuid_for(amd_host(), 3, 5);
  const kvm_cpuid_entry2& size = find(table, 0x80000008);
  EXPECT_EQ(size.ecx & 0xff, 4u) << "cores - 1";
  EXPECT_EQ((size.ecx >> 12) & 0xf, 3u) << "APIC ID bits for 5 cores";
  EXPECT_EQ(size.eax, 0x3030u);
  const kvm_cpuid_entry2& ext = find(table, 0x8000001e);
  EXPECT_EQ(ext.eax, 3u) << "extended APIC ID";
  EXPECT_EQ(ext.ebx & 0xffff, 3u) << "core 3, one thread";
  EXPECT_EQ(ext.ecx & 0x7ff, 0u);
}

// Firecracker's smt: vCPUs 2k and 2k+1 are the threads of core k, in every leaf a Linux
// guest reads its topology from.
TEST(X86Cpuid, WithSmtEachCoreHasTwoThreads) {
  const auto intel =
      vcpu_cpuid(
          intel_host(true),
          {.vcpu_index = 3, .vcpu_count = 6, .tsc_deadline_timer = false, .threads_per_core = 2})
          .value();
  for (const uint32_t leaf : {0xbu, 0x1fu}) {
    SCOPED_TRACE(leaf);
    const kvm_cpuid_entry2& smt = find(intel, leaf, 0);
    EXPECT_EQ(smt.eax, 1u) << "one bit of APIC ID for the thread";
    EXPECT_EQ(smt.ebx, 2u) << "two threads per core";
    const kvm_cpuid_entry2& core = find(intel, leaf, 1);
    EXPECT_EQ(core.eax, 3u);
    EXPECT_EQ(core.ebx, 6u) << "six threads in the package";
    EXPECT_EQ(core.edx, 3u);
  }
  for (uint32_t index = 0; index < 4; ++index) {
    const kvm_cpuid_entry2& cache = find(intel, 4, index);
    EXPECT_EQ(cache.eax >> 26, 2u) << "3 cores per package";
    const uint32_t level = (cache.eax >> 5) & 7;
    EXPECT_EQ((cache.eax >> 14) & 0xfff, level == 3 ? 5u : 1u) << "a core's caches: 2 threads";
  }
  auto amd_host_without_topoext = amd_host();
  for (kvm_cpuid_entry2& e : amd_host_without_topoext) {
    if (e.function == 0x80000001) e.ecx &= ~kCpuidTopoExtBit;
  }
  const auto amd =
      vcpu_cpuid(
          amd_host_without_topoext,
          {.vcpu_index = 3, .vcpu_count = 4, .tsc_deadline_timer = false, .threads_per_core = 2})
          .value();
  const kvm_cpuid_entry2& ext = find(amd, 0x8000001e);
  EXPECT_EQ(ext.ebx & 0xff, 1u) << "vCPU 3 is in core 1";
  EXPECT_EQ((ext.ebx >> 8) & 0xff, 1u) << "two threads per core, less one";
  EXPECT_EQ(find(amd, 0x80000008).ecx & 0xff, 3u) << "four threads, less one";
  EXPECT_NE(find(amd, 0x80000001).ecx & kCpuidTopoExtBit, 0u) << "Linux reads 0x8000001E then";
  const auto no_smt = cpuid_for(amd_host_without_topoext, 0, 4);
  EXPECT_EQ(find(no_smt, 0x80000001).ecx & kCpuidTopoExtBit, 0u)
      << "without SMT the host's bit stays as it was";
}

TEST(X86Cpuid, SmtWithAnOddVcpuCountIsRefusedAndOneVcpuIsACore) {
  EXPECT_FALSE(vcpu_cpuid(intel_host(true), {0, 3, false, 2}));
  EXPECT_FALSE(vcpu_cpuid(intel_host(true), {0, 2, false, 3}));
  const auto one = vcpu_cpuid(intel_host(true), {0, 1, false, 2}).value();
  EXPECT_EQ(find(one, 0xb, 0).ebx, 1u);
}

TEST(X86Cpuid, NestedVirtualizationIsHidden) {
  // Intel: VMX in leaf 1 ECX (the host table's 0x77fafbff has it).
  const auto intel = intel_host(true);
  ASSERT_NE(find(intel, 1).ecx & kCpuidVmxBit, 0u) << "the test's host must offer VMX";
  const auto intel_table = cpuid_for(intel, 0, 1);  // kept: find() returns into it
  const kvm_cpuid_entry2& leaf1 = find(intel_table, 1);
  EXPECT_EQ(leaf1.ecx & kCpuidVmxBit, 0u);
  EXPECT_EQ(leaf1.ecx & ~(kCpuidVmxBit | kCpuidHypervisorBit),
            find(intel, 1).ecx & ~(kCpuidVmxBit | kCpuidHypervisorBit))
      << "only VMX and the hypervisor bit change";

  // AMD: SVM in leaf 0x80000001 ECX, and its feature leaf.
  const auto amd = amd_host();
  ASSERT_NE(find(amd, 0x80000001).ecx & kCpuidSvmBit, 0u) << "the test's host must offer SVM";
  const auto table = cpuid_for(amd, 0, 1);
  EXPECT_EQ(find(table, 0x80000001).ecx, find(amd, 0x80000001).ecx & ~kCpuidSvmBit);
  EXPECT_EQ(find(table, 0x80000001).edx, find(amd, 0x80000001).edx);
  const kvm_cpuid_entry2& svm = find(table, kCpuidSvmFeaturesLeaf);
  EXPECT_EQ(svm.eax | svm.ebx | svm.ecx | svm.edx, 0u);
}

std::string signature(const kvm_cpuid_entry2& leaf) {
  char text[12];
  std::memcpy(text, &leaf.ebx, 4);
  std::memcpy(text + 4, &leaf.ecx, 4);
  std::memcpy(text + 8, &leaf.edx, 4);
  return std::string(text, 12);
}

TEST(X86Cpuid, KvmLeavesAreAddedWhenKvmDidNotListThem) {
  const auto table = cpuid_for(intel_host(false), 0, 1);
  ASSERT_EQ(find_all(table, KVM_CPUID_SIGNATURE).size(), 1u);
  EXPECT_EQ(signature(find(table, KVM_CPUID_SIGNATURE)), std::string("KVMKVMKVM\0\0\0", 12));
  EXPECT_EQ(find(table, KVM_CPUID_SIGNATURE).eax, KVM_CPUID_FEATURES);
  ASSERT_EQ(find_all(table, KVM_CPUID_FEATURES).size(), 1u);
  const uint32_t features = find(table, KVM_CPUID_FEATURES).eax;
  EXPECT_NE(features & (1u << KVM_FEATURE_CLOCKSOURCE), 0u);
  EXPECT_NE(features & (1u << KVM_FEATURE_CLOCKSOURCE2), 0u);
  EXPECT_NE(features & (1u << KVM_FEATURE_CLOCKSOURCE_STABLE_BIT), 0u);
}

TEST(X86Cpuid, KvmLeavesListedByKvmAreKeptNotDuplicated) {
  const auto table = cpuid_for(intel_host(true), 0, 1);
  ASSERT_EQ(find_all(table, KVM_CPUID_SIGNATURE).size(), 1u);
  ASSERT_EQ(find_all(table, KVM_CPUID_FEATURES).size(), 1u);
  EXPECT_EQ(signature(find(table, KVM_CPUID_SIGNATURE)), std::string("KVMKVMKVM\0\0\0", 12));
  EXPECT_EQ(find(table, KVM_CPUID_FEATURES).eax, 0x01007efbu) << "what this KVM supports";
}

TEST(X86Cpuid, OtherLeavesPassThrough) {
  const auto host = intel_host(true);
  const auto table = cpuid_for(host, 1, 2);
  EXPECT_EQ(find(table, 0).ebx, find(host, 0).ebx);
  EXPECT_EQ(find(table, 7).ebx, find(host, 7).ebx);
  EXPECT_EQ(find(table, 7).flags, kIndexed);
  // 0xB gained its terminating level and 0x1F lost the die level; nothing else came or went.
  EXPECT_EQ(table.size(), host.size());
}

TEST(X86Cpuid, BadIndexOrCountIsAnError) {
  const auto host = intel_host(true);
  EXPECT_THAT(vcpu_cpuid(host, {2, 2, false, 1}).error().message(), HasSubstr("vCPU 2 of 2"));
  EXPECT_FALSE(vcpu_cpuid(host, {0, 0, false, 1}).has_value());
  EXPECT_FALSE(vcpu_cpuid(host, {0, 255, false, 1}).has_value());
}

}  // namespace
}  // namespace dsec::x86_64

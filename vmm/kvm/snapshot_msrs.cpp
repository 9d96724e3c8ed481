#include "vmm/kvm/snapshot_msrs.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include "vmm/kvm/kvm_system.h"

namespace dsec::kvm {
namespace {

struct MsrRange {
  uint32_t first;
  uint32_t last;  // inclusive
  bool contains(uint32_t index) const { return first <= index && index <= last; }
};

// The MSRs that hold guest state (after Firecracker's list, src/vmm/src/arch/x86_64/msr.rs).
// EFER, FS/GS base and the APIC base also travel in kvm_sregs, the x2APIC range in the
// LAPIC state: they stay here for hosts whose KVM lists them.
constexpr std::array kStateRanges = {
    MsrRange{0x10, 0x10},              // IA32_TSC
    MsrRange{0x1b, 0x1b},              // IA32_APIC_BASE
    MsrRange{0x3b, 0x3b},              // IA32_TSC_ADJUST
    MsrRange{0x48, 0x48},              // IA32_SPEC_CTRL
    MsrRange{0x174, 0x176},            // IA32_SYSENTER_CS, _ESP, _EIP
    MsrRange{0x179, 0x17b},            // IA32_MCG_CAP, _STATUS, _CTL
    MsrRange{0x1a0, 0x1a0},            // IA32_MISC_ENABLE
    MsrRange{0x1c4, 0x1c5},            // IA32_XFD, IA32_XFD_ERR (AMX's lazy state)
    MsrRange{0x200, 0x2ff},            // MTRRs, IA32_PAT (0x277)
    MsrRange{0x400, 0x47f},            // IA32_MCi_CTL/STATUS/ADDR/MISC, 32 banks
    MsrRange{0x4d0, 0x4d0},            // IA32_MCG_EXT_CTL
    MsrRange{0x6e0, 0x6e0},            // IA32_TSC_DEADLINE
    MsrRange{0x800, 0x8ff},            // x2APIC
    MsrRange{0xda0, 0xda0},            // IA32_XSS
    MsrRange{0xc0000080, 0xc0000084},  // EFER, STAR, LSTAR, CSTAR, SFMASK
    MsrRange{0xc0000100, 0xc0000103},  // FS_BASE, GS_BASE, KERNEL_GS_BASE, TSC_AUX
    MsrRange{0x4b564d00, 0x4b564dff},  // KVM's paravirtual MSRs (kvmclock, async PF, ...)
};

// KVM emulates the MTRRs for every vCPU (arch/x86/kvm/mtrr.c) but leaves them out of
// KVM_GET_MSR_INDEX_LIST; QEMU saves them by name. A guest enables them at boot (our boot
// MSRs set the default type to write-back), so a restore without them would run the
// guest with MTRRs disabled.
constexpr std::array<uint32_t, 28> kUnlistedMtrrs = {
    0x200, 0x201, 0x202, 0x203, 0x204, 0x205, 0x206, 0x207,  // variable: 8 base/mask pairs
    0x208, 0x209, 0x20a, 0x20b, 0x20c, 0x20d, 0x20e, 0x20f,  //
    0x250, 0x258, 0x259,                                     // fixed 64K, 16K
    0x268, 0x269, 0x26a, 0x26b, 0x26c, 0x26d, 0x26e, 0x26f,  // fixed 4K
    0x2ff,                                                   // MTRRdefType
};

bool is_state(uint32_t index) {
  return std::ranges::any_of(kStateRanges, [index](MsrRange r) { return r.contains(index); });
}

}  // namespace

std::vector<uint32_t> select_snapshot_msrs(std::span<const uint32_t> kvm_list) {
  std::vector<uint32_t> selected;
  std::unordered_set<uint32_t> seen;
  const auto add = [&](uint32_t index) {
    if (seen.insert(index).second) {
      selected.push_back(index);
    }
  };
  for (const uint32_t index : kvm_list) {
    if (is_state(index)) {
      add(index);
    }
  }
  std::ranges::for_each(kUnlistedMtrrs, add);
  return selected;
}

Result<std::vector<uint32_t>> snapshot_msr_indices(const KvmSystem& kvm) {
  const auto listed = DSEC_TRY(kvm.msr_index_list());
  return select_snapshot_msrs(listed);
}

}  // namespace dsec::kvm

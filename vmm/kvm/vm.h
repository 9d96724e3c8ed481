// One KVM virtual machine: memory slots, in-kernel irqchip and PIT, interrupt lines,
// ioeventfds and irqfds, VM-wide state for snapshots, and its vCPUs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/kvm/linux_kvm.h"
#include "vmm/kvm/vcpu.h"

namespace dsec::kvm {

enum class IoSpace : uint8_t { kPio, kMmio };

// A guest write to [address, address + length) in `space` signals `eventfd` inside KVM,
// without an exit to the VMM; only writes carrying `datamatch` do, when it is set.
struct IoEventFd {
  int eventfd;
  IoSpace space;
  uint64_t address;
  uint32_t length;  // 0 (any length, MMIO only), 1, 2, 4 or 8
  std::optional<uint64_t> datamatch;
};

class Vm {
 public:
  // Takes a KVM_CREATE_VM fd; KvmSystem::create_vm() is the usual way to get a Vm.
  Vm(UniqueFd fd, size_t vcpu_mmap_size) : fd_(std::move(fd)), vcpu_mmap_size_(vcpu_mmap_size) {}

  int fd() const { return fd_.get(); }

  // KVM_CHECK_EXTENSION on the VM: 0 when unsupported, otherwise a capability-specific
  // positive value (what this VM can do, which may differ from the system's answer).
  Result<int> check_extension(int capability) const;

  // KVM_SET_USER_MEMORY_REGION; memory_size 0 deletes the slot. The mapping at
  // userspace_addr must outlive the slot.
  Status set_user_memory_region(const kvm_userspace_memory_region& region);
  // KVM_SET_TSS_ADDR: three pages of guest-physical space, outside RAM and MMIO, that
  // Intel's real-mode emulation uses. Call before creating vCPUs.
  Status set_tss_addr(uint64_t address);
  // KVM_SET_IDENTITY_MAP_ADDR: one page, as for the TSS; before creating vCPUs.
  Status set_identity_map_addr(uint64_t address);
  // KVM_CREATE_IRQCHIP (PIC, IOAPIC, per-vCPU LAPIC); before creating vCPUs.
  Status create_irqchip();
  // KVM_CREATE_PIT2; after the irqchip. flags: 0 or KVM_PIT_SPEAKER_DUMMY.
  Status create_pit2(uint32_t flags = 0);
  // KVM_IRQ_LINE: drive interrupt line `irq` of the in-kernel irqchip.
  Status irq_line(uint32_t irq, bool level);
  // KVM_SIGNAL_MSI: a fixed, edge-triggered interrupt of `vector` to the local APIC whose
  // (physical) ID is `apic_id`, as a device's MSI would send it. False where the guest's
  // APIC refused it (disabled, say).
  Result<bool> signal_msi(uint32_t apic_id, uint8_t vector);

  // KVM_IOEVENTFD, and the same with KVM_IOEVENTFD_FLAG_DEASSIGN.
  Status register_ioeventfd(const IoEventFd& ioeventfd);
  Status unregister_ioeventfd(const IoEventFd& ioeventfd);
  // KVM_IRQFD: a write to `eventfd` raises `gsi`. With a resample fd the line is level
  // triggered and KVM signals `resample_eventfd` on EOI.
  Status register_irqfd(int eventfd, uint32_t gsi, std::optional<int> resample_eventfd = {});
  Status unregister_irqfd(int eventfd, uint32_t gsi);

  // VM-wide state, for snapshots.
  Result<kvm_clock_data> get_clock() const;
  Status set_clock(const kvm_clock_data& clock);
  // chip_id: KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE or KVM_IRQCHIP_IOAPIC.
  Result<kvm_irqchip> get_irqchip(uint32_t chip_id) const;
  Status set_irqchip(const kvm_irqchip& chip);
  Result<kvm_pit_state2> get_pit2() const;
  Status set_pit2(const kvm_pit_state2& pit);

  // KVM_GET_DIRTY_LOG for a slot registered with KVM_MEM_LOG_DIRTY_PAGES: bit i of the
  // result is guest page i of the slot (4 KiB pages), set if written since the last call.
  Result<std::vector<uint64_t>> get_dirty_log(uint32_t slot, uint64_t slot_size) const;

  // KVM_CREATE_VCPU and the mapping of its kvm_run.
  Result<Vcpu> create_vcpu(uint32_t id) const;

 private:
  Status ioeventfd(const IoEventFd& ioeventfd, bool deassign);

  UniqueFd fd_;
  size_t vcpu_mmap_size_;
};

}  // namespace dsec::kvm

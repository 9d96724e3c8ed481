#include "vmm/kvm/vm.h"

#include "vmm/kvm/ioctl.h"

namespace dsec::kvm {

Result<int> Vm::check_extension(int capability) const {
  return kvm_ioctl(fd(), KVM_CHECK_EXTENSION, capability, "KVM_CHECK_EXTENSION",
                   {"", static_cast<uint64_t>(capability)});
}

Status Vm::set_user_memory_region(const kvm_userspace_memory_region& region) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_USER_MEMORY_REGION, &region, "KVM_SET_USER_MEMORY_REGION",
                     {"slot", region.slot}));
  return ok();
}

Status Vm::set_tss_addr(uint64_t address) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_TSS_ADDR, static_cast<unsigned long>(address),
                     "KVM_SET_TSS_ADDR", {"", address}));
  return ok();
}

Status Vm::set_identity_map_addr(uint64_t address) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_IDENTITY_MAP_ADDR, &address, "KVM_SET_IDENTITY_MAP_ADDR",
                     {"", address}));
  return ok();
}

Status Vm::create_irqchip() {
  DSEC_TRY(kvm_ioctl(fd(), KVM_CREATE_IRQCHIP, 0, "KVM_CREATE_IRQCHIP"));
  return ok();
}

Status Vm::create_pit2(uint32_t flags) {
  kvm_pit_config config{};
  config.flags = flags;
  DSEC_TRY(kvm_ioctl(fd(), KVM_CREATE_PIT2, &config, "KVM_CREATE_PIT2"));
  return ok();
}

Status Vm::irq_line(uint32_t irq, bool level) {
  kvm_irq_level line{};
  line.irq = irq;
  line.level = level ? 1 : 0;
  DSEC_TRY(kvm_ioctl(fd(), KVM_IRQ_LINE, &line, "KVM_IRQ_LINE", {"irq", irq}));
  return ok();
}

Result<bool> Vm::signal_msi(uint32_t apic_id, uint8_t vector) {
  kvm_msi msi{};
  msi.address_lo = 0xfee00000u | (apic_id << 12);  // physical destination, no redirection
  msi.data = vector;                                // fixed delivery, edge
  const int delivered =
      DSEC_TRY(kvm_ioctl(fd(), KVM_SIGNAL_MSI, &msi, "KVM_SIGNAL_MSI", {"apic id", apic_id}));
  return delivered > 0;
}

Status Vm::ioeventfd(const IoEventFd& ioeventfd, bool deassign) {
  kvm_ioeventfd request{};
  request.addr = ioeventfd.address;
  request.len = ioeventfd.length;
  request.fd = ioeventfd.eventfd;
  if (ioeventfd.space == IoSpace::kPio) {
    request.flags |= KVM_IOEVENTFD_FLAG_PIO;
  }
  if (ioeventfd.datamatch) {
    request.flags |= KVM_IOEVENTFD_FLAG_DATAMATCH;
    request.datamatch = *ioeventfd.datamatch;
  }
  if (deassign) {
    request.flags |= KVM_IOEVENTFD_FLAG_DEASSIGN;
  }
  DSEC_TRY(kvm_ioctl(fd(), KVM_IOEVENTFD, &request,
                     deassign ? "KVM_IOEVENTFD(deassign)" : "KVM_IOEVENTFD",
                     {"address", ioeventfd.address}));
  return ok();
}

Status Vm::register_ioeventfd(const IoEventFd& ioeventfd) {
  return this->ioeventfd(ioeventfd, false);
}

Status Vm::unregister_ioeventfd(const IoEventFd& ioeventfd) {
  return this->ioeventfd(ioeventfd, true);
}

Status Vm::register_irqfd(int eventfd, uint32_t gsi, std::optional<int> resample_eventfd) {
  kvm_irqfd request{};
  request.fd = static_cast<uint32_t>(eventfd);
  request.gsi = gsi;
  if (resample_eventfd) {
    request.flags |= KVM_IRQFD_FLAG_RESAMPLE;
    request.resamplefd = static_cast<uint32_t>(*resample_eventfd);
  }
  DSEC_TRY(kvm_ioctl(fd(), KVM_IRQFD, &request, "KVM_IRQFD", {"gsi", gsi}));
  return ok();
}

Status Vm::unregister_irqfd(int eventfd, uint32_t gsi) {
  kvm_irqfd request{};
  request.fd = static_cast<uint32_t>(eventfd);
  request.gsi = gsi;
  request.flags = KVM_IRQFD_FLAG_DEASSIGN;
  DSEC_TRY(kvm_ioctl(fd(), KVM_IRQFD, &request, "KVM_IRQFD(deassign)", {"gsi", gsi}));
  return ok();
}

Result<kvm_clock_data> Vm::get_clock() const {
  kvm_clock_data clock{};
  DSEC_TRY(kvm_ioctl(fd(), KVM_GET_CLOCK, &clock, "KVM_GET_CLOCK"));
  return clock;
}

Status Vm::set_clock(const kvm_clock_data& clock) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK"));
  return ok();
}

Result<kvm_irqchip> Vm::get_irqchip(uint32_t chip_id) const {
  kvm_irqchip chip{};
  chip.chip_id = chip_id;
  DSEC_TRY(kvm_ioctl(fd(), KVM_GET_IRQCHIP, &chip, "KVM_GET_IRQCHIP", {"chip", chip_id}));
  return chip;
}

Status Vm::set_irqchip(const kvm_irqchip& chip) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_IRQCHIP, &chip, "KVM_SET_IRQCHIP", {"chip", chip.chip_id}));
  return ok();
}

Result<kvm_pit_state2> Vm::get_pit2() const {
  kvm_pit_state2 pit{};
  DSEC_TRY(kvm_ioctl(fd(), KVM_GET_PIT2, &pit, "KVM_GET_PIT2"));
  return pit;
}

Status Vm::set_pit2(const kvm_pit_state2& pit) {
  DSEC_TRY(kvm_ioctl(fd(), KVM_SET_PIT2, &pit, "KVM_SET_PIT2"));
  return ok();
}

Result<std::vector<uint64_t>> Vm::get_dirty_log(uint32_t slot, uint64_t slot_size) const {
  constexpr uint64_t kPageSize = 4096;
  const uint64_t pages = (slot_size + kPageSize - 1) / kPageSize;
  // KVM copies the bitmap in whole longs, so round up to 64 pages.
  std::vector<uint64_t> bitmap((pages + 63) / 64);
  kvm_dirty_log log{};
  log.slot = slot;
  log.dirty_bitmap = bitmap.data();
  DSEC_TRY(kvm_ioctl(fd(), KVM_GET_DIRTY_LOG, &log, "KVM_GET_DIRTY_LOG", {"slot", slot}));
  return bitmap;
}

Result<Vcpu> Vm::create_vcpu(uint32_t id) const {
  return Vcpu::create(fd(), id, vcpu_mmap_size_);
}

}  // namespace dsec::kvm

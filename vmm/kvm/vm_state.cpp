#include "vmm/kvm/vm_state.h"

#include "vmm/kvm/vm.h"

namespace dsec::kvm {

Result<VmState> capture(const Vm& vm) {
  VmState state;
  state.pit = DSEC_TRY(vm.get_pit2());
  state.clock = DSEC_TRY(vm.get_clock());
  state.pic_master = DSEC_TRY(vm.get_irqchip(KVM_IRQCHIP_PIC_MASTER));
  state.pic_slave = DSEC_TRY(vm.get_irqchip(KVM_IRQCHIP_PIC_SLAVE));
  state.ioapic = DSEC_TRY(vm.get_irqchip(KVM_IRQCHIP_IOAPIC));
  return state;
}

kvm_clock_data clock_to_restore(const kvm_clock_data& saved, bool host_has_realtime) {
  // Only the flag KVM_SET_CLOCK acts on: kernels before 5.16 refuse any flag at all, and
  // TSC_STABLE and HOST_TSC describe the saving host.
  kvm_clock_data clock{};
  clock.clock = saved.clock;
  if (host_has_realtime && (saved.flags & KVM_CLOCK_REALTIME) != 0) {
    clock.flags = KVM_CLOCK_REALTIME;
    clock.realtime = saved.realtime;
  }
  return clock;
}

Status restore(Vm& vm, const VmState& state) {
  const int adjust_clock = DSEC_TRY(vm.check_extension(KVM_CAP_ADJUST_CLOCK));
  DSEC_TRY(vm.set_pit2(state.pit));
  DSEC_TRY(vm.set_clock(clock_to_restore(state.clock, (adjust_clock & KVM_CLOCK_REALTIME) != 0)));
  DSEC_TRY(vm.set_irqchip(state.pic_master));
  DSEC_TRY(vm.set_irqchip(state.pic_slave));
  DSEC_TRY(vm.set_irqchip(state.ioapic));
  return ok();
}

}  // namespace dsec::kvm

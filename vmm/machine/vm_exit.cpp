#include "vmm/machine/vm_exit.h"

namespace dsec::machine {

int VmExit::exit_code() const {
  switch (kind) {
    case VmExitKind::kGuestReboot:
    case VmExitKind::kGuestPowerOff:
    case VmExitKind::kStopped:
      return 0;
    case VmExitKind::kGuestPanic:
    case VmExitKind::kTripleFault:
      return 2;
    case VmExitKind::kKvmError:
    case VmExitKind::kVmmError:
      return 3;
  }
  return 3;
}

std::string VmExit::describe() const {
  const char* what = "";
  switch (kind) {
    case VmExitKind::kGuestReboot: what = "the guest rebooted"; break;
    case VmExitKind::kGuestPowerOff: what = "the guest powered off"; break;
    case VmExitKind::kGuestPanic: what = "the guest crashed"; break;
    case VmExitKind::kTripleFault: what = "a vCPU triple-faulted"; break;
    case VmExitKind::kKvmError: what = "KVM failed"; break;
    case VmExitKind::kVmmError: what = "the VMM failed"; break;
    case VmExitKind::kStopped: what = "stopped by the host"; break;
  }
  return detail.empty() ? what : std::string(what) + ": " + detail;
}

}  // namespace dsec::machine

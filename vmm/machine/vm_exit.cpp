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

namespace {

const char* how_it_ended(VmExitKind kind) {
  switch (kind) {
    case VmExitKind::kGuestReboot:
      return "the guest rebooted";
    case VmExitKind::kGuestPowerOff:
      return "the guest powered off";
    case VmExitKind::kGuestPanic:
      return "the guest crashed";
    case VmExitKind::kTripleFault:
      return "a vCPU triple-faulted";
    case VmExitKind::kKvmError:
      return "KVM failed";
    case VmExitKind::kVmmError:
      return "the VMM failed";
    case VmExitKind::kStopped:
      return "stopped by the host";
  }
  return "the VM ended";
}

}  // namespace

std::string VmExit::describe() const {
  const char* what = how_it_ended(kind);
  return detail.empty() ? what : std::string(what) + ": " + detail;
}

}  // namespace dsec::machine

// How a VM ended, and the process exit code each way maps to.
#pragma once

#include <string>

namespace dsec::machine {

enum class VmExitKind {
  kGuestReboot,    // the guest rebooted (reboot=k through the i8042, or a reset event)
  kGuestPowerOff,  // the guest powered off
  kGuestPanic,     // the guest rebooted without its init's clean-shutdown announcement
  kTripleFault,    // a vCPU triple-faulted (KVM_EXIT_SHUTDOWN)
  kKvmError,       // KVM failed or could not handle an exit
  kVmmError,       // the VMM itself failed while the VM ran (its device thread died)
  kStopped,        // the host asked the VM to stop (signal, API)
};

struct VmExit {
  VmExitKind kind = VmExitKind::kStopped;
  std::string detail;  // what happened, for the log

  // 0 for an orderly end by the guest or the host; 2 when the guest crashed (panic,
  // triple fault); 3 when KVM or the VMM failed while it ran. (1 is the CLI's code for an
  // error before start.)
  int exit_code() const;
  // e.g. "guest rebooted", "vCPU 1 triple-faulted"
  std::string describe() const;
};

}  // namespace dsec::machine

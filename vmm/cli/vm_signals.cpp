#include "vmm/cli/vm_signals.h"

namespace dsec::cli {

bool take_look_signal(machine::Machine* vm, int signo) {
  if (signo != SIGUSR1 && signo != SIGUSR2) {
    return false;
  }
  if (vm == nullptr) {
    return true;
  }
  if (signo == SIGUSR1) {
    vm->log_state();
  } else {
    vm->send_wakeup_ipis();
  }
  return true;
}

}  // namespace dsec::cli

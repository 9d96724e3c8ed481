// The signals a VMM's commands take from outside, read by a watcher thread (blocked before
// any other thread starts, so that only the watcher sees them): SIGINT and SIGTERM stop the
// VM; SIGUSR1 logs where its interrupts and devices stand (Machine::log_state); SIGUSR2
// sends its vCPUs the wake-up IPIs (Machine::send_wakeup_ipis).
#pragma once

#include <signal.h>

#include "vmm/io/signal_watcher.h"
#include "vmm/machine/machine.h"

namespace dsec::cli {

// Blocks the four signals in the calling thread (and the threads it starts after).
#define DSEC_BLOCK_VM_SIGNALS(name) io::BlockedSignals name{SIGINT, SIGTERM, SIGUSR1, SIGUSR2}

// SIGUSR1 and SIGUSR2 for `vm` (none yet: nothing to look at): true. Any other signal is
// the caller's, a stop: false.
bool take_look_signal(machine::Machine* vm, int signo);

}  // namespace dsec::cli

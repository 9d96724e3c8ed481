// Interrupting a VMM thread inside a blocking system call: a vCPU in KVM_RUN, the console
// thread in a write to a reader that stopped reading.
#pragma once

namespace dsec::machine {

// The signal (SIGRTMIN) whose handler does nothing, installed without SA_RESTART: a thread
// it reaches inside a blocking call sees that call return EINTR (or a short count).
int thread_kick_signal();

// Installs that handler, once per process; every user calls it before its first kick.
void install_thread_kick_handler();

}  // namespace dsec::machine

#include "vmm/machine/thread_kick.h"

#include <signal.h>

#include <mutex>

namespace dsec::machine {

int thread_kick_signal() {
  return SIGRTMIN;
}

void install_thread_kick_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: the interrupted call must return
    sigaction(thread_kick_signal(), &action, nullptr);
  });
}

}  // namespace dsec::machine

// Process signals turned into calls on a thread of their own, for a long-running command
// (`dsec-vmm run`): SIGTERM stops the VM, SIGUSR1 logs its devices' state.
//
// BlockedSignals blocks the set in the calling thread, and so in every thread started
// after it: construct it before any thread. SignalWatcher then reads them from a signalfd
// and waits on nothing else but its own stop eventfd, so that destroying it wakes and
// joins the thread at once (a VMM's exit should not wait for a polling tick).
#pragma once

#include <signal.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <thread>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/event_fd.h"

namespace dsec::io {

class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals);
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  // Leaves them blocked: a signal that arrives after the watcher has gone stays pending,
  // as it would have been lost anyway, rather than killing a process that is exiting.
  ~BlockedSignals() = default;
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_{};
};

class SignalWatcher {
 public:
  // Calls on_signal(signo) on the watcher's thread, "dsec-signals", for each signal of
  // `signals` received. The thread calls `setup` first (its seccomp filter goes in there);
  // if that fails, it logs why and handles no signal.
  static Result<std::unique_ptr<SignalWatcher>> start(const BlockedSignals& signals,
                                                      std::function<void(int)> on_signal,
                                                      std::function<Status()> setup = {});
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // Wakes the thread through its stop eventfd and joins it. Signals still queued are not
  // handled.
  ~SignalWatcher();

 private:
  SignalWatcher(UniqueFd signal_fd, EventFd stop, std::function<void(int)> on_signal,
                std::function<Status()> setup);
  void run();

  UniqueFd signal_fd_;
  EventFd stop_;
  std::function<void(int)> on_signal_;
  std::function<Status()> setup_;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace dsec::io

#include "vmm/machine/run_control.h"

namespace dsec::machine {

void RunControl::set_state_locked(RunState state) {
  state_.store(state, std::memory_order_release);
  changed_.notify_all();
}

void RunControl::request_exit(VmExit exit) {
  {
    std::lock_guard lock(mutex_);
    if (exit_) {
      return;
    }
    exit_ = std::move(exit);
    set_state_locked(RunState::kStopping);
  }
  if (kick_all_) {
    kick_all_();
  }
}

void RunControl::pause() {
  {
    std::lock_guard lock(mutex_);
    if (state() != RunState::kRunning) {
      return;
    }
    set_state_locked(RunState::kPaused);
  }
  if (kick_all_) {
    kick_all_();
  }
  std::unique_lock lock(mutex_);
  changed_.wait(lock,
                [&] { return state() != RunState::kPaused || parked_ + exited_ >= vcpu_count_; });
}

void RunControl::set_paused_before_start() {
  std::lock_guard lock(mutex_);
  if (state() == RunState::kRunning) {
    set_state_locked(RunState::kPaused);
  }
}

void RunControl::resume() {
  std::lock_guard lock(mutex_);
  if (state() == RunState::kPaused) {
    set_state_locked(RunState::kRunning);
  }
}

bool RunControl::wait_until_runnable() {
  std::unique_lock lock(mutex_);
  if (state() == RunState::kPaused) {
    ++parked_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return state() != RunState::kPaused; });
    --parked_;
  }
  return state() == RunState::kRunning;
}

void RunControl::thread_exited() {
  std::lock_guard lock(mutex_);
  ++exited_;
  changed_.notify_all();
}

VmExit RunControl::wait_for_exit() {
  std::unique_lock lock(mutex_);
  while (!exit_) {
    changed_.wait(lock);
  }
  return *exit_;
}

std::optional<VmExit> RunControl::exit_reason() const {
  std::lock_guard lock(mutex_);
  return exit_;
}

}  // namespace dsec::machine

// The run state every vCPU thread of one VM obeys: running, paused or stopping, and the
// first reason the VM ended. The kick that moves vCPUs out of KVM_RUN lives with the
// threads (VcpuThread); this class only holds and publishes the state.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "vmm/machine/vm_exit.h"

namespace dsec::machine {

enum class RunState { kRunning, kPaused, kStopping };

class RunControl {
 public:
  // `kick_all` makes every vCPU thread leave KVM_RUN soon; called after each state change.
  explicit RunControl(size_t vcpu_count) : vcpu_count_(vcpu_count) {}

  void set_kick(std::function<void()> kick_all) { kick_all_ = std::move(kick_all); }

  // Cheap check for vCPU threads between exits.
  RunState state() const { return state_.load(std::memory_order_acquire); }

  // Ends the VM; the first exit reported wins, later ones are ignored.
  void request_exit(VmExit exit);
  // Blocks until every vCPU thread is parked (or the VM is stopping). No-op unless running.
  void pause();
  void resume();
  // Before the vCPU threads start: they park at once, and pause() has nothing to wait for.
  void set_paused_before_start();

  // For vCPU threads: parks while paused. Returns false when the thread must stop.
  bool wait_until_runnable();
  // For vCPU threads leaving their loop, so pause() does not wait for them.
  void thread_exited();

  // vCPU threads call this before each KVM_RUN; the first call's time is kept.
  void note_kvm_run() {
    int64_t expected = 0;
    if (first_run_ns_.load(std::memory_order_relaxed) == 0) {
      first_run_ns_.compare_exchange_strong(
          expected, std::chrono::steady_clock::now().time_since_epoch().count());
    }
  }
  std::optional<std::chrono::steady_clock::time_point> first_kvm_run() const {
    int64_t ns = first_run_ns_.load();
    if (ns == 0) {
      return std::nullopt;
    }
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(ns));
  }

  // Blocks until the VM ends and returns why.
  VmExit wait_for_exit();
  std::optional<VmExit> exit_reason() const;

 private:
  void set_state_locked(RunState state);

  const size_t vcpu_count_;
  std::function<void()> kick_all_;
  std::atomic<RunState> state_{RunState::kRunning};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  size_t parked_ = 0;
  size_t exited_ = 0;
  std::optional<VmExit> exit_;
  std::atomic<int64_t> first_run_ns_{0};
};

}  // namespace dsec::machine

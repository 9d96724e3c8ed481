// One vCPU on its own thread: the KVM_RUN loop, with port and MMIO exits sent to the buses
// and every other exit turned into a VM exit on the shared RunControl.
#pragma once

#include <pthread.h>

#include <atomic>
#include <thread>

#include "vmm/devices/bus.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/machine/guest_profiler.h"
#include "vmm/machine/run_control.h"
#include "vmm/seccomp/policy.h"

namespace dsec::machine {

class VcpuThread {
 public:
  // `profiler`, if not null, gets this vCPU's RIP after every kick. The thread, named
  // "dsec-vcpu<id>", installs the vcpu role's filter of `seccomp` before its first KVM_RUN.
  VcpuThread(kvm::Vcpu vcpu, const devices::Bus& pio, const devices::Bus& mmio, RunControl& control,
             GuestProfiler* profiler = nullptr, seccomp::Policy seccomp = {});
  VcpuThread(const VcpuThread&) = delete;
  VcpuThread& operator=(const VcpuThread&) = delete;
  ~VcpuThread();  // joins

  kvm::Vcpu& vcpu() { return vcpu_; }

  void start();
  // Makes the vCPU leave KVM_RUN (or not enter it) soon, so it sees a state change.
  // Safe from any thread.
  void kick();
  void join();

 private:
  void loop();
  // Handles one exit; returns false when the loop must end.
  bool handle(const kvm::VcpuExit& exit);
  // For a pause: lets KVM finish the I/O instruction of the last exit without running the
  // guest further. Returns false when the loop must end.
  bool complete_pending_io();

  kvm::Vcpu vcpu_;
  const devices::Bus& pio_;
  const devices::Bus& mmio_;
  RunControl& control_;
  GuestProfiler* const profiler_;
  const seccomp::Policy seccomp_;
  std::thread thread_;
  std::atomic<pthread_t> handle_{};
  std::atomic<bool> started_{false};
};

}  // namespace dsec::machine

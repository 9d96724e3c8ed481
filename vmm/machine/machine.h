// A running VM: guest memory, the KVM VM with its irqchip and PIT, the legacy devices on
// the buses, and one thread per vCPU. create() turns a MachineConfig into a VM ready to
// start; every way in (CLI, API, library) goes through it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/bus.h"
#include "vmm/devices/legacy/boot_timer.h"
#include "vmm/devices/legacy/serial.h"
#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/guest_profiler.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/vcpu_thread.h"
#include "vmm/machine/virtio_devices.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::machine {

// Figures about one run, for benchmarks and logs.
struct MachineMetrics {
  std::optional<std::chrono::nanoseconds> start_to_first_kvm_run;
  std::optional<std::chrono::nanoseconds> start_to_userspace;
  // Resident memory of the VMM process outside guest RAM, in KiB (from /proc/self/smaps).
  uint64_t vmm_rss_kib = 0;
};

class Machine {
 public:
  // Validates the config, loads the kernel and boot data into fresh guest memory, then
  // creates the VM, its devices and vCPUs. Nothing runs until start().
  static Result<std::unique_ptr<Machine>> create(const MachineConfig& config);

  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;
  ~Machine();  // stops the VM and joins every thread

  // Starts the vCPU threads and the console input thread.
  Status start();
  // Blocks until the VM ends, joins every thread and returns why it ended.
  VmExit wait();
  // Parks every vCPU outside KVM_RUN; resume() lets them go on.
  void pause() { control_.pause(); }
  void resume() { control_.resume(); }
  // Ends the VM (idempotent). wait() then returns kStopped unless it had ended already.
  void stop(std::string why = "stop requested");
  // Logs where the VM's interrupts stand (each vCPU's and the IOAPIC's, read with the vCPUs
  // parked for a moment) and the state of every virtio device
  // (VirtioDevices::request_state_log, logged from the event loop); any thread.
  void log_state();

  GuestMemory& memory() { return memory_; }
  MachineMetrics metrics() const;

 private:
  Machine(const MachineConfig& config, GuestMemory memory, kvm::KvmSystem kvm, kvm::Vm vm);

  Status setup_devices();
  Status setup_vcpus(const x86_64::LoadedKernel& kernel);
  void on_guest_reset();
  void kick_all();
  void input_loop();
  void join_all();
  void write_profile() const;
  void log_interrupt_state();

  MachineConfig config_;
  RunControl control_;
  GuestMemory memory_;
  kvm::KvmSystem kvm_;
  kvm::Vm vm_;
  devices::Bus pio_{devices::AddressSpace::kPio};
  devices::Bus mmio_{devices::AddressSpace::kMmio};
  std::shared_ptr<devices::Serial> serial_;
  std::shared_ptr<devices::BootTimer> boot_timer_;
  // After the buses and vm_, so that it goes first: its event loop stops before the
  // devices and the KVM registrations go.
  std::unique_ptr<VirtioDevices> virtio_;
  // Before vcpus_, which point to it; stopped in join_all() before they are joined.
  std::unique_ptr<GuestProfiler> profiler_;
  std::vector<std::unique_ptr<VcpuThread>> vcpus_;
  UniqueFd input_stop_;  // eventfd that ends the console input thread
  std::thread input_thread_;
  bool joined_ = false;
  std::atomic<bool> started_{false};  // the vCPU threads are running
};

}  // namespace dsec::machine

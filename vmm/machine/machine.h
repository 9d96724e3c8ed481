// A running VM: guest memory, the KVM VM with its irqchip and PIT, the legacy devices on
// the buses, and one thread per vCPU. create() turns a MachineConfig into a VM ready to
// start; every way in (CLI, API, library) goes through it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/bus.h"
#include "vmm/devices/legacy/boot_timer.h"
#include "vmm/devices/legacy/i8042.h"
#include "vmm/devices/legacy/serial.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/console.h"
#include "vmm/machine/guest_profiler.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/machine/vcpu_thread.h"
#include "vmm/machine/virtio_devices.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::machine {

// A snapshot's state file, read and checked (machine_snapshot.cpp).
struct SnapshotState;

// KVM's side of a new VM: the VM with its TSS, identity map, irqchip, PIT and memory
// slots, one per region of `memory`. It never touches the contents of guest memory.
Result<std::pair<kvm::KvmSystem, kvm::Vm>> create_vm(const MachineConfig& config,
                                                     const GuestMemory& memory);

// What one snapshot cost.
struct SnapshotFigures {
  uint64_t ram_bytes = 0;             // the memory file's size
  uint64_t memory_written_bytes = 0;  // of it, non-zero pages written (the rest are holes)
  uint64_t state_bytes = 0;
  std::chrono::nanoseconds devices_quiesced{};  // from the call to devices at rest
  std::chrono::nanoseconds state_saved{};       // vCPU, VM and device state captured
  std::chrono::nanoseconds memory_written{};    // the memory file written
};

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
  // Builds the VM of a snapshot (machine_snapshot.cpp): the state file at `state_path`
  // and the memory file at `memory_path`, mapped copy-on-write, so that every clone of a
  // snapshot shares its pages. The snapshot's configuration with `overrides` applied says
  // what to build; `host` gives what a snapshot does not keep (console fds, the KVM
  // device, the process start). Every section of the state file is read and checked
  // before the first KVM call. Nothing runs until start(); with `paused`, start() leaves
  // the vCPUs parked until resume().
  static Result<std::unique_ptr<Machine>> restore(const std::string& state_path,
                                                  const std::string& memory_path,
                                                  const RestoreOverrides& overrides,
                                                  const MachineConfig& host, bool paused);

  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;
  ~Machine();  // stops the VM and joins every thread

  // Starts the vCPU threads and the console thread.
  Status start();
  // Blocks until the VM ends, joins every thread and returns why it ended.
  VmExit wait();
  // Parks every vCPU outside KVM_RUN, each with the I/O instruction it exited on finished,
  // and tells the guest's kvmclock (KVM_KVMCLOCK_CTRL) so that its watchdogs forgive the
  // pause. resume() serves the devices again (after a snapshot, every ready queue) and
  // lets the vCPUs go on. Both are no-ops when the VM is not paused or running.
  void pause();
  void resume();
  bool paused() const { return control_.state() == RunState::kPaused; }
  // Whether the VM has ended (or is ending): wait() returns at once.
  bool ended() const { return control_.exit_reason().has_value(); }
  // Writes a snapshot of the paused VM: its state file to `state_path` and its guest
  // memory to `memory_path` (machine_snapshot.cpp). The devices come to rest first (the
  // vsock streams end with a transport reset); the VM stays paused.
  Result<SnapshotFigures> snapshot(const std::string& state_path, const std::string& memory_path);
  // Types ctrl-alt-del on the i8042's keyboard (Firecracker's SendCtrlAltDel): a guest
  // whose kernel has the atkbd driver and the VT layer reboots, or signals its init, and
  // the reboot ends the VM. Fails when the guest turned its keyboard off; any thread.
  Status send_ctrl_alt_del();
  // A running VM's new rate limiters (Firecracker's PATCH /drives/{id} and
  // /network-interfaces/{id}): drive `index` of config().drives, or interface `index` of
  // config().nets;
  // in force from the device's next request, and in config() (and so in a snapshot). On
  // the thread that reads config() (the API's).
  Status set_drive_rate_limiter(size_t index, const devices::RateLimiterConfig& limiter);
  Status set_net_rate_limiters(size_t index, const devices::RateLimiterConfig& rx,
                               const devices::RateLimiterConfig& tx);
  // Firecracker's PATCH /drives/{id} with path_on_host: drive `index`'s disk is the file at
  // `path` from now on, and the guest is told its new size; config() (and a snapshot) has
  // the new path. A file that cannot be the disk changes nothing. On the API's thread.
  Status set_drive_file(size_t index, const std::string& path);
  // Ends the VM (idempotent). wait() then returns kStopped unless it had ended already.
  void stop(std::string why = "stop requested");
  // Ends the VM as failed by the VMM (exit status 3): a thread of the VMM cannot do its job.
  void fail_vm(std::string why);
  // Installs `role`'s seccomp filter (config().seccomp) in the calling thread, a thread of
  // this VM's VMM; if it cannot, fails the VM and returns why: the thread must not go on.
  Status install_thread_filter(seccomp::Role role);
  // A restored clone whose agent took fresh entropy and the host's clock
  // (sync_restored_clone): its vsock socket lets other host processes through, which it
  // held until then. Any thread.
  void admit_every_vsock_connection();
  // Logs where the VM's interrupts stand (each vCPU's and the IOAPIC's, read with the vCPUs
  // parked for a moment) and the state of every virtio device
  // (VirtioDevices::request_state_log, logged from the event loop); any thread.
  void log_state();
  // Sends each vCPU the two interrupts a Linux guest's CPUs wake each other with (vectors
  // 0xfb, call-function-single, and 0xfd, reschedule) and logs that it did: a probe for a
  // guest that stopped answering because a wake-up was lost on its way (a guest that
  // answers soon after had been waiting for one; docs/kvm-test-bed-faults.md). A guest that
  // was waiting for none finds its queues empty. Any thread; SIGUSR2 asks for it.
  void send_wakeup_ipis();

  GuestMemory& memory() { return memory_; }
  const MachineConfig& config() const { return config_; }
  MachineMetrics metrics() const;
  // Firecracker's metrics of the VM's devices (devices::DeviceMetrics::take_report): what
  // they counted since the previous call, added to `report`. One caller at a time; any
  // thread.
  void take_metrics_report(nlohmann::json& report) const;

 private:
  Machine(const MachineConfig& config, GuestMemory memory, kvm::KvmSystem kvm, kvm::Vm vm);

  // The assembly a boot and a restore share, around a VM from create_vm(): the devices,
  // and the vCPUs (created, not set up).
  static Result<std::unique_ptr<Machine>> assemble(const MachineConfig& config, GuestMemory memory,
                                                   kvm::KvmSystem kvm, kvm::Vm vm);
  Status setup_devices();
  Status create_vcpus();
  // A boot's vCPU set-up: CPUID, MSRs, FPU, LAPIC, and the boot vCPU's registers.
  Status boot_vcpus(const x86_64::LoadedKernel& kernel);
  // A restore's: every vCPU's, the VM's and the devices' state from the snapshot.
  Status restore_state(const SnapshotState& state);
  void on_guest_reset();
  void kick_all();
  void join_all();
  void write_profile() const;
  void log_interrupt_state();

  MachineConfig config_;
  RunControl control_;
  GuestMemory memory_;
  kvm::KvmSystem kvm_;
  kvm::Vm vm_;
  // Before the buses and the UART, which call its output sink: it goes last. Its thread
  // stops in join_all(), after the vCPUs'.
  std::unique_ptr<Console> console_;
  devices::Bus pio_{devices::AddressSpace::kPio};
  devices::Bus mmio_{devices::AddressSpace::kMmio};
  std::shared_ptr<devices::Serial> serial_;
  std::shared_ptr<devices::I8042> i8042_;
  std::shared_ptr<devices::BootTimer> boot_timer_;
  // After the buses and vm_, so that it goes first: its event loop stops before the
  // devices and the KVM registrations go.
  std::unique_ptr<VirtioDevices> virtio_;
  // Before vcpus_, which point to it; stopped in join_all() before they are joined.
  std::unique_ptr<GuestProfiler> profiler_;
  std::vector<std::unique_ptr<VcpuThread>> vcpus_;
  bool joined_ = false;
  bool devices_quiesced_ = false;     // by a snapshot: resume() serves them again
  bool restored_ = false;             // start() serves the devices before the vCPUs run
  std::atomic<bool> started_{false};  // the vCPU threads are running
};

}  // namespace dsec::machine

#include "vmm/machine/machine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <thread>
#include <utility>

#include "vmm/arch/x86_64/boot_regs.h"
#include "vmm/arch/x86_64/cpuid.h"
#include "vmm/arch/x86_64/layout.h"
#include "vmm/arch/x86_64/vcpu_init.h"
#include "vmm/devices/legacy/cmos.h"
#include "vmm/devices/legacy/i8042.h"
#include "vmm/devices/legacy/null_device.h"
#include "vmm/kvm/interrupt_state_text.h"
#include "vmm/machine/guest_image.h"
#include "vmm/machine/process_memory.h"

namespace dsec::machine {

using namespace std::chrono_literals;

Result<std::pair<kvm::KvmSystem, kvm::Vm>> create_vm(const MachineConfig& config,
                                                     const GuestMemory& memory) {
  auto kvm = DSEC_TRY(kvm::KvmSystem::open(config.kvm_device));
  if (kvm::KvmSystem::served_by_pvm()) {
    spdlog::warn(
        "{} is served by PVM (the kvm_pvm module, KVM without VMX/SVM): it boots only "
        "PVM-enlightened guest kernels; an ordinary one, the default image's too, dies early in "
        "its boot on an instruction KVM cannot emulate (docs/kvm-test-bed.md)",
        config.kvm_device);
  }
  const int max_vcpus = DSEC_TRY(kvm.max_vcpus());
  if (config.vcpus > static_cast<uint32_t>(max_vcpus)) {
    return fail("--vcpus " + std::to_string(config.vcpus) + " is more than KVM allows here (" +
                    std::to_string(max_vcpus) + ")",
                "give fewer vCPUs");
  }
  auto vm = DSEC_TRY(kvm.create_vm());
  spdlog::debug("VM created");
  // Order matters: TSS and identity map, then the irqchip and PIT, all before any vCPU.
  DSEC_TRY(vm.set_tss_addr(x86_64::kKvmTssAddr));
  DSEC_TRY(vm.set_identity_map_addr(x86_64::kKvmIdentityMapAddr));
  DSEC_TRY(vm.create_irqchip());
  DSEC_TRY(vm.create_pit2(KVM_PIT_SPEAKER_DUMMY));
  uint32_t slot = 0;
  for (const auto& region : memory.regions()) {
    kvm_userspace_memory_region r{};
    r.slot = slot++;
    r.guest_phys_addr = region.gpa();
    r.memory_size = region.size();
    r.userspace_addr = reinterpret_cast<uint64_t>(region.host());
    DSEC_TRY(vm.set_user_memory_region(r));
  }
  spdlog::debug("irqchip, PIT and memory set");
  return std::pair{std::move(kvm), std::move(vm)};
}

Result<std::unique_ptr<Machine>> Machine::create(const MachineConfig& config) {
  spdlog::debug("creating the VM");
  if (config.seccomp.mode != seccomp::Mode::kOff) {
    seccomp::prepare_process();  // before the loader, the VM's first thread
  }
  DSEC_TRY(validate(config));
  spdlog::debug("configuration checked");

  // Guest memory, and the kernel, initrd and command line checked against it, come
  // first: a bad kernel or an initrd that does not fit is the user's mistake, reported
  // before any KVM call.
  auto ranges = DSEC_TRY(x86_64::ram_regions(config.memory_mib * x86_64::kMiB));
  auto memory = DSEC_TRY(GuestMemory::anonymous(ranges));
  spdlog::debug("guest memory mapped");
  const auto image = DSEC_TRY(GuestImagePlan::create(config, memory));
  spdlog::debug("kernel, initrd and command line checked");

  // Writing them into guest memory overlaps KVM's set-up of the VM. The loader is joined
  // before the memory moves into the Machine, and on an early return before the memory
  // is unmapped (it is declared after it).
  Status loaded = ok();
  std::jthread loader([&] { loaded = image.write(memory); });
  auto created = create_vm(config, memory);
  loader.join();
  DSEC_TRY(loaded);
  spdlog::debug("kernel, initrd and boot data loaded");
  auto [kvm, vm] = DSEC_TRY(std::move(created));
  auto machine = DSEC_TRY(assemble(config, std::move(memory), std::move(kvm), std::move(vm)));
  DSEC_TRY(machine->boot_vcpus(image.kernel()));
  spdlog::debug("vCPUs set");
  return machine;
}

Result<std::unique_ptr<Machine>> Machine::assemble(const MachineConfig& config, GuestMemory memory,
                                                   kvm::KvmSystem kvm, kvm::Vm vm) {
  std::unique_ptr<Machine> machine(
      new Machine(config, std::move(memory), std::move(kvm), std::move(vm)));
  DSEC_TRY(machine->setup_devices());
  spdlog::debug("devices set");
  DSEC_TRY(machine->create_vcpus());
  return machine;
}

Machine::Machine(const MachineConfig& config, GuestMemory memory, kvm::KvmSystem kvm, kvm::Vm vm)
    : config_(config),
      control_(config.vcpus),
      memory_(std::move(memory)),
      kvm_(std::move(kvm)),
      vm_(std::move(vm)) {
  control_.set_kick([this] { kick_all(); });
  if (!config_.guest_profile_path.empty()) {
    // Only the vCPUs: the console input thread has nothing to sample.
    profiler_ = std::make_unique<GuestProfiler>(
        config_.guest_profile_interval,
        [this] {
          for (auto& vcpu : vcpus_) {
            vcpu->kick();
          }
        },
        [this] { return install_thread_filter(seccomp::Role::kProfiler).has_value(); });
  }
}

Machine::~Machine() {
  stop("the VMM is shutting down");
  join_all();
}

Status Machine::setup_devices() {
  console_ = DSEC_TRY(Console::create({.output_fd = config_.console_output_fd,
                                       .input_fd = config_.console_input_fd,
                                       .output_limit = config_.console_output_limit}));
  serial_ = std::make_shared<devices::Serial>(console_->output_sink(), [this](bool raised) {
    if (auto s = vm_.irq_line(x86_64::kCom1Irq, raised); !s) {
      spdlog::warn("serial interrupt: {}", s.error().message());
    }
  });
  DSEC_TRY(pio_.insert({x86_64::kCom1Port, devices::kSerialRegisterCount}, serial_));
  i8042_ = std::make_shared<devices::I8042>(
      [this] { on_guest_reset(); },
      [this](bool raised) {
        if (auto s = vm_.irq_line(x86_64::kI8042Irq, raised); !s) {
          spdlog::warn("keyboard interrupt: {}", s.error().message());
        }
      });
  DSEC_TRY(pio_.insert({x86_64::kI8042DataPort, devices::kI8042RegisterCount}, i8042_));
  DSEC_TRY(pio_.insert({devices::kCmosPort, devices::kCmosRegisterCount},
                       std::make_shared<devices::Cmos>()));
  DSEC_TRY(pio_.insert({devices::kPostCodePort, 1}, std::make_shared<devices::NullDevice>()));
  // It logs the time from the VMM's start to guest userspace.
  boot_timer_ = std::make_shared<devices::BootTimer>(config_.process_start);
  DSEC_TRY(pio_.insert({x86_64::kBootTimerPort, devices::kBootTimerRegisterCount}, boot_timer_));

  if (const auto specs = virtio_devices(config_); !specs.empty()) {
    virtio_ = DSEC_TRY(VirtioDevices::create(vm_, memory_, mmio_, specs));
  }
  return ok();
}

Status Machine::create_vcpus() {
  for (uint32_t id = 0; id < config_.vcpus; ++id) {
    auto vcpu = DSEC_TRY(vm_.create_vcpu(id));
    vcpus_.push_back(std::make_unique<VcpuThread>(std::move(vcpu), pio_, mmio_, control_,
                                                  profiler_.get(), config_.seccomp));
  }
  return ok();
}

Status Machine::boot_vcpus(const x86_64::LoadedKernel& kernel) {
  const auto supported = DSEC_TRY(kvm_.supported_cpuid());
  const bool tsc_deadline = DSEC_TRY(kvm_.check_extension(KVM_CAP_TSC_DEADLINE_TIMER)) > 0;
  const auto msrs = x86_64::boot_msrs();
  for (auto& thread : vcpus_) {
    kvm::Vcpu& vcpu = thread->vcpu();
    const uint32_t id = vcpu.id();
    auto cpuid =
        DSEC_TRY(x86_64::vcpu_cpuid(supported, {.vcpu_index = id,
                                                .vcpu_count = config_.vcpus,
                                                .tsc_deadline_timer = tsc_deadline,
                                                .threads_per_core = config_.smt ? 2U : 1U}));
    DSEC_TRY(vcpu.set_cpuid2(cpuid));
    DSEC_TRY(vcpu.set_msrs(msrs));
    DSEC_TRY(vcpu.set_fpu(x86_64::boot_fpu()));
    DSEC_TRY(vcpu.set_lapic(x86_64::lapic_with_lint_modes(DSEC_TRY(vcpu.get_lapic()))));
    if (id == 0) {
      DSEC_TRY(vcpu.set_sregs(x86_64::boot_sregs(kernel.protocol, DSEC_TRY(vcpu.get_sregs()))));
      DSEC_TRY(vcpu.set_regs(x86_64::boot_regs(kernel)));
    }
  }
  return ok();
}

Status Machine::send_ctrl_alt_del() {
  if (ended()) {
    return fail("the VM has ended");
  }
  DSEC_TRY(i8042_->send_ctrl_alt_del());
  spdlog::info("ctrl-alt-del typed on the guest's keyboard");
  return ok();
}

Status Machine::set_drive_rate_limiter(size_t index, const devices::RateLimiterConfig& limiter) {
  if (ended()) {
    return fail("the VM has ended");
  }
  DSEC_TRY(virtio_->set_drive_rate_limiter(index, limiter));
  config_.drives.at(index).rate_limiter = limiter;
  return ok();
}

Status Machine::set_drive_file(size_t index, const std::string& path) {
  if (ended()) {
    return fail("the VM has ended");
  }
  DSEC_TRY(virtio_->replace_drive_file(index, path));
  config_.drives.at(index).path = path;
  return ok();
}

Status Machine::set_net_rate_limiters(size_t index, const devices::RateLimiterConfig& rx,
                                      const devices::RateLimiterConfig& tx) {
  if (ended()) {
    return fail("the VM has ended");
  }
  DSEC_TRY(virtio_->set_net_rate_limiters(index, {.rx = rx, .tx = tx}));
  config_.nets.at(index).rx_rate_limiter = rx;
  config_.nets.at(index).tx_rate_limiter = tx;
  return ok();
}

void Machine::on_guest_reset() {
  if (config_.expect_clean_shutdown_announcement && !boot_timer_->shutdown_announced()) {
    control_.request_exit(
        {VmExitKind::kGuestPanic, boot_timer_->boot_time()
                                      ? "it rebooted without its init announcing it (init died, or "
                                        "failed: its console says why)"
                                      : "it rebooted before reaching userspace (kernel panic?)"});
    return;
  }
  control_.request_exit({VmExitKind::kGuestReboot, {}});
}

void Machine::kick_all() {
  for (auto& vcpu : vcpus_) {
    vcpu->kick();
  }
}

Status Machine::start() {
  DSEC_TRY(console_->start(serial_.get(),
                           [this] { return install_thread_filter(seccomp::Role::kConsoleInput); }));
  if (virtio_) {
    DSEC_TRY(virtio_->start(
        [this](const Status& result) {
          if (!result) {
            // The devices can no longer hear the guest: end the VM rather than hang it.
            control_.request_exit({VmExitKind::kVmmError,
                                   "the virtio event loop failed: " + result.error().message()});
          }
        },
        [this] { return install_thread_filter(seccomp::Role::kEventLoop); }));
  }
  if (virtio_ && restored_) {
    // Before the vCPUs run: the driver may have queued work the snapshot's devices never
    // took, and an interrupt it had not taken is raised again.
    virtio_->resume();
  }
  if (profiler_) {
    // Before the vCPU threads: their samples are timed from its start.
    profiler_->start();
  }
  for (auto& vcpu : vcpus_) {
    vcpu->start();
  }
  started_.store(true, std::memory_order_release);
  return ok();
}

Status Machine::install_thread_filter(seccomp::Role role) {
  auto filtered = config_.seccomp.apply(role);
  if (!filtered) {
    fail_vm(fmt::format("the {} thread: {}", seccomp::role_name(role), filtered.error().message()));
  }
  return filtered;
}

void Machine::pause() {
  if (control_.state() != RunState::kRunning) {
    return;
  }
  control_.pause();
  if (control_.state() != RunState::kPaused) {
    return;  // the VM is ending
  }
  for (auto& vcpu : vcpus_) {
    if (auto told = vcpu->vcpu().kvmclock_ctrl(); !told) {
      spdlog::warn("pausing vCPU {}: {}", vcpu->vcpu().id(), told.error().message());
    }
  }
}

void Machine::resume() {
  if (control_.state() != RunState::kPaused) {
    return;
  }
  if (virtio_ && devices_quiesced_) {
    virtio_->resume();
  }
  devices_quiesced_ = false;
  control_.resume();
}

void Machine::admit_every_vsock_connection() {
  virtio_->admit_every_vsock_connection();
}

void Machine::stop(std::string why) {
  control_.request_exit({VmExitKind::kStopped, std::move(why)});
}

void Machine::fail_vm(std::string why) {
  control_.request_exit({VmExitKind::kVmmError, std::move(why)});
}

VmExit Machine::wait() {
  VmExit exit = control_.wait_for_exit();
  join_all();
  write_profile();
  return exit;
}

void Machine::write_profile() const {
  if (!profiler_) {
    return;
  }
  const auto samples = profiler_->samples();
  if (auto written =
          GuestProfiler::write(config_.guest_profile_path, samples, config_.guest_profile_interval);
      !written) {
    spdlog::warn("{}", written.error().message());
    return;
  }
  spdlog::info("guest profile: {} samples in {} (report: tools/guest-profile {})", samples.size(),
               config_.guest_profile_path, config_.guest_profile_path);
}

void Machine::join_all() {
  if (joined_) {
    return;
  }
  if (profiler_) {
    profiler_->stop();
  }
  for (auto& vcpu : vcpus_) {
    vcpu->join();
  }
  // After the vCPUs: no more output comes.
  if (console_) {
    console_->stop();
  }
  // After the vCPUs: no notification arrives once the loop is gone.
  if (virtio_) {
    if (auto stopped = virtio_->stop(); !stopped) {
      spdlog::warn("virtio event loop: {}", stopped.error().message());
    }
  }
  joined_ = true;
}

void Machine::log_state() {
  log_interrupt_state();
  if (virtio_) {
    virtio_->request_state_log();
  } else {
    spdlog::info("device state: this VM has no virtio devices");
  }
}

void Machine::log_interrupt_state() {
  if (!started_.load(std::memory_order_acquire)) {
    spdlog::info("interrupt state: the vCPUs have not started");
    return;
  }
  // A vCPU's registers and local APIC can only be read outside KVM_RUN: park every vCPU for
  // the reading (unless something else has them parked already), then let them go on.
  const bool was_running = control_.state() == RunState::kRunning;
  if (was_running) {
    control_.pause();
  }
  if (control_.state() != RunState::kPaused) {
    return;  // the VM is ending
  }
  std::string text;
  for (auto& vcpu : vcpus_) {
    text += fmt::format("\n  vcpu {}: {}", vcpu->vcpu().id(),
                        kvm::describe_vcpu_interrupts(vcpu->vcpu()));
  }
  text += "\n  ioapic: " + kvm::describe_ioapic(vm_);
  if (was_running) {
    control_.resume();
  }
  spdlog::info("interrupt state (the vCPUs parked to read it):{}", text);
}

void Machine::send_wakeup_ipis() {
  if (!started_.load(std::memory_order_acquire)) {
    spdlog::info("wake-up IPIs: the vCPUs have not started");
    return;
  }
  constexpr uint8_t kCallFunctionSingleVector = 0xfb;
  constexpr uint8_t kRescheduleVector = 0xfd;
  size_t delivered = 0;
  for (auto& vcpu : vcpus_) {
    for (const uint8_t vector : {kCallFunctionSingleVector, kRescheduleVector}) {
      const auto sent = vm_.signal_msi(vcpu->vcpu().id(), vector);
      if (!sent) {
        spdlog::warn("wake-up IPIs: {}", sent.error().message());
        return;
      }
      delivered += *sent ? 1 : 0;
    }
  }
  spdlog::info("wake-up IPIs: vectors 0xfb and 0xfd sent to each of {} vCPUs ({} of {} taken)",
               vcpus_.size(), delivered, 2 * vcpus_.size());
}

MachineMetrics Machine::metrics() const {
  MachineMetrics m;
  if (auto first = control_.first_kvm_run()) {
    m.start_to_first_kvm_run = *first - config_.process_start;
  }
  if (auto boot = boot_timer_->boot_time()) {
    m.start_to_userspace = *boot;
  }
  std::vector<std::pair<uint64_t, uint64_t>> guest;
  for (const auto& region : memory_.regions()) {
    auto base = reinterpret_cast<uint64_t>(region.host());
    guest.emplace_back(base, base + region.size());
  }
  m.vmm_rss_kib = rss_kib_excluding(guest).value_or(0);
  return m;
}

void Machine::take_metrics_report(nlohmann::json& report) const {
  if (virtio_) {
    virtio_->metrics().take_report(report);
  }
}

}  // namespace dsec::machine

// `dsec-vmm run`: boots a Linux guest and runs it until it ends.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/jail_options.h"
#include "vmm/cli/netns_option.h"
#include "vmm/cli/serve_vm.h"
#include "vmm/cli/vm_options.h"
#include "vmm/common/unique_fd.h"
#include "vmm/jail/supervisor.h"
#include "vmm/machine/machine.h"

namespace dsec::cli {
namespace {

struct RunOptions {
  VmOptions vm;
  ConsoleOptions console;
  std::string metrics_file;
  std::string profile_guest;  // empty: no profile
  uint32_t profile_interval_us = 1000;
  ApiOptions api;
  JailOptions jail;
  std::string netns;  // empty: the namespace it was started in (or the jail's own)
};

// Boots `config` and runs it to its end; in a jail, `jailed` is locked down before the
// guest runs.
int run_vm(machine::MachineConfig config, const RunOptions& options, jail::JailedProcess* jailed,
           std::chrono::steady_clock::time_point process_start) {
  auto console = open_console(options.console, config, true);
  if (!console) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", console.error().message().c_str());
    return 1;
  }
  return serve_vm([&] { return machine::Machine::create(config); },
                  {.command = "run",
                   .metrics_file = options.metrics_file,
                   .before_start = jailed ? lock_down_before_start(*jailed) : nullptr,
                   .after_start = {},
                   .api = options.api,
                   .api_metrics_path = {}},
                  process_start);
}

// `options` with every path as a jailed VMM reaches it: what it opens before its pivot
// absolute, what it uses after inside the jail and relative to it.
Status jail_paths(const jail::JailPaths& paths, machine::MachineConfig& config,
                  RunOptions& options) {
  config.kernel_path = jail::JailPaths::outside(config.kernel_path);
  config.initrd_path = jail::JailPaths::outside(config.initrd_path);
  for (auto& drive : config.drives) {
    drive.path = jail::JailPaths::outside(drive.path);
  }
  if (config.vsock) {
    config.vsock->uds_path = DSEC_TRY(paths.inside(config.vsock->uds_path, "--vsock"));
  }
  if (!config.guest_profile_path.empty()) {
    config.guest_profile_path =
        DSEC_TRY(paths.inside(config.guest_profile_path, "--profile-guest"));
  }
  return jail_serve_paths(paths, options.console.path, options.metrics_file, options.api);
}

int run_main(const RunOptions& options, std::chrono::steady_clock::time_point process_start) {
  if (auto joined = join_netns(options.netns); !joined) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", joined.error().message().c_str());
    return 1;
  }
  auto config = machine_config(options.vm, process_start);
  if (!config) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", config.error().message().c_str());
    return 1;
  }
  config->guest_profile_path = options.profile_guest;
  config->guest_profile_interval = std::chrono::microseconds(options.profile_interval_us);
  if (!options.jail.enabled()) {
    return run_vm(*config, options, nullptr, process_start);
  }
  RunOptions jailed_options = options;
  const auto jail = [&]() -> Result<Jail> {
    auto made = DSEC_TRY(jail_of(options.jail));
    made.config.own_network_namespace = options.netns.empty();
    DSEC_TRY(jail_paths(made.paths, *config, jailed_options));
    for (const auto& net : config->nets) {
      if (net.tap_fd >= 0) {
        made.config.kept_fds.push_back(net.tap_fd);
      }
    }
    return made;
  }();
  if (!jail) {
    (void)std::fprintf(stderr, "dsec-vmm run: %s\n", jail.error().message().c_str());
    return 1;
  }
  return run_in_jail(*jail, "run", [&](jail::JailedProcess& jailed) {
    return run_vm(*config, jailed_options, &jailed, process_start);
  });
}

}  // namespace

void add_run_command(CLI::App& app, CommandAction& action,
                     std::chrono::steady_clock::time_point process_start) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Boot a Linux guest and run it until it ends");
  run->footer(
      "Without --kernel or --initrd, the default image (images/build-image) supplies them; "
      "its init reboots when done, which ends the VM. The guest's serial console (COM1) goes "
      "to stdout or --console, and reads stdin. Exit status: 0 when the guest rebooted or "
      "powered off, 1 for a bad configuration (nothing started), 2 when the guest crashed "
      "(kernel panic, triple fault), 3 when KVM or the VMM failed, 4 when a thread of the VMM "
      "made a system call its seccomp filter forbids (--seccomp; stderr names the thread and "
      "the call: a bug in dsec-vmm, or a VMM the guest took over); with --jail, 5 when its "
      "cgroup's OOM killer killed the VMM (memory.max), 6 when another signal did. "
      "SIGINT/SIGTERM stop the VM (status 0); SIGUSR1 logs where the interrupts stand (each "
      "vCPU: halted or not, its local APIC's pending and in-service vectors; the IOAPIC's "
      "pins) and the state of every virtio device (its queues' indices, vsock's streams and "
      "credit), for a look at a VM that seems stuck; SIGUSR2 sends each vCPU the two "
      "interrupts a Linux guest's CPUs wake each other with (vectors 0xfb and 0xfd) and logs "
      "it: a guest that answers soon after had lost a wake-up (docs/kvm-test-bed-faults.md).");
  add_vm_options(*run, options->vm);
  add_console_options(*run, options->console);
  run->add_option("--metrics-file", options->metrics_file,
                  "Write boot figures (JSON) here when the VM ends");
  run->add_option("--profile-guest", options->profile_guest,
                  "Sample where each vCPU is (its instruction pointer) every "
                  "--profile-interval-us and write the samples to this file when the VM ends; "
                  "tools/guest-profile turns them into a per-function report. Each sample is an "
                  "exit: the guest runs slower while profiled");
  run->add_option("--profile-interval-us", options->profile_interval_us,
                  "Microseconds between two samples of --profile-guest (100 to 1000000)")
      ->capture_default_str();
  add_api_options(*run, options->api,
                  "PATCH /vm pauses and resumes the guest, PUT /snapshot/create writes a "
                  "snapshot of it while paused (dsec-vmm snapshot is a client), PUT /actions "
                  "SendCtrlAltDel asks it to reboot");
  add_netns_option(*run, options->netns);
  add_jail_options(*run, options->jail);
  run->callback([&action, options, process_start] {
    action = [options, process_start] { return run_main(*options, process_start); };
  });
}

}  // namespace dsec::cli

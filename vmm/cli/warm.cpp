// `dsec-vmm warm`: boots an image, waits for its agent, runs set-up commands, and writes a
// snapshot of it: a warm image that `dsec-vmm restore` starts in milliseconds.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "vmm/agent/client.h"
#include "vmm/agent/frame_io.h"
#include "vmm/agent/readiness.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/serve_vm.h"
#include "vmm/cli/vm_options.h"
#include "vmm/cli/vm_signals.h"
#include "vmm/io/signal_watcher.h"
#include "vmm/machine/machine.h"
#include "vmm/seccomp/role.h"
#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct WarmOptions {
  VmOptions vm;
  std::string out;
  std::vector<std::string> execs;  // shell commands, run in order with /bin/sh -c
  ConsoleOptions console;
  double agent_timeout_s = 120;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The vsock socket a warm boot uses when none is given: on a local file system (a Unix
// socket cannot live on 9p or NFS), unique to this process.
std::string default_vsock_path() {
  const std::string dir = ::access("/run", W_OK) == 0 ? "/run" : "/tmp";
  return dir + "/dsec-vmm-warm-" + std::to_string(::getpid()) + ".vsock";
}

Status run_setup(const std::string& uds, const std::string& command) {
  agent::AgentClient client([uds] { return agent::connect_vsock_uds(uds, agent::kAgentPort); });
  agent::ExecRequest req;
  req.argv = {"/bin/sh", "-c", command};
  auto to_stderr = [](std::span<const uint8_t> b) { return agent::write_all(STDERR_FILENO, b); };
  const auto exit = DSEC_TRY(client.exec(req, to_stderr, to_stderr));
  if (exit.kind != agent::ExitStatus::Kind::kExited || exit.code != 0) {
    return fail("--exec '" + command + "' failed in the guest (" +
                    (exit.kind == agent::ExitStatus::Kind::kExited
                         ? "exit status " + std::to_string(exit.code)
                         : "killed by signal " + std::to_string(exit.code)) +
                    ")",
                "fix the command; nothing was snapshotted");
  }
  return ok();
}

Status warm(machine::Machine& vm, const WarmOptions& options, Clock::time_point process_start) {
  const auto& vsock = vm.config().vsock;
  if (!vsock.has_value()) {
    return fail("the VM has no vsock device, so no agent to wait for");
  }
  const std::string uds = vsock->uds_path;
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.agent_timeout_s * 1000));
  DSEC_TRY(agent::wait_for_agent(uds, timeout, [&vm] { return !vm.ended(); }));
  const auto ready = Clock::now();
  spdlog::info("warm: agent ready {:.0f} ms after start", ms_between(process_start, ready));
  for (const auto& command : options.execs) {
    spdlog::info("warm: running '{}'", command);
    DSEC_TRY(run_setup(uds, command));
  }
  std::error_code ec;
  std::filesystem::create_directories(options.out, ec);
  if (ec) {
    return fail("cannot create --out " + options.out + ": " + ec.message());
  }
  const auto t0 = Clock::now();
  vm.pause();
  const auto files = snapshot::snapshot_files(options.out);
  const auto figures = DSEC_TRY(vm.snapshot(files.state, files.memory));
  const auto t1 = Clock::now();
  spdlog::info(
      "warm: snapshot written to {} in {:.0f} ms (devices at rest {:.1f} ms, state {:.1f} "
      "ms, memory {:.0f} ms: {} MiB of RAM, {} MiB written, the rest holes)",
      options.out, ms_between(t0, t1),
      std::chrono::duration<double, std::milli>(figures.devices_quiesced).count(),
      std::chrono::duration<double, std::milli>(figures.state_saved).count(),
      std::chrono::duration<double, std::milli>(figures.memory_written).count(),
      figures.ram_bytes >> 20, figures.memory_written_bytes >> 20);
  return ok();
}

int warm_main(WarmOptions options, Clock::time_point process_start) {
  if (options.vm.vsock.empty()) {
    options.vm.vsock = default_vsock_path();
  }
  auto config = machine_config(options.vm, process_start);
  if (!config) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", config.error().message().c_str());
    return 1;
  }
  if (config->expect_clean_shutdown_announcement &&
      config->cmdline.find("dsec.agent") == std::string::npos) {
    config->cmdline += " dsec.agent";  // the default image serves the agent only when asked
  }
  auto console = open_console(options.console, *config, false);
  if (!console) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", console.error().message().c_str());
    return 1;
  }
  // As for run (vm_signals.h): a warm-up that hangs can say where.
  DSEC_BLOCK_VM_SIGNALS(signals);
  auto vm = machine::Machine::create(*config);
  if (!vm) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", vm.error().message().c_str());
    return 1;
  }
  auto watcher = io::SignalWatcher::start(
      signals,
      [&vm = **vm](int signo) {
        if (!take_look_signal(&vm, signo)) {
          vm.stop(signo == SIGINT ? "received SIGINT" : "received SIGTERM");
        }
      },
      [&vm = **vm] { return vm.install_thread_filter(seccomp::Role::kSignals); });
  if (!watcher) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", watcher.error().message().c_str());
    return 3;
  }
  if (auto started = (*vm)->start(); !started) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", started.error().message().c_str());
    return 1;
  }
  if (auto filtered = (*vm)->install_thread_filter(seccomp::Role::kMain); !filtered) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", filtered.error().message().c_str());
    (*vm)->wait();
    return 3;
  }
  const auto warmed = warm(**vm, options, process_start);
  (*vm)->stop(warmed ? "snapshot taken" : "warming failed");
  const auto exit = (*vm)->wait();
  if (!warmed) {
    (void)std::fprintf(stderr, "dsec-vmm warm: %s\n", warmed.error().message().c_str());
    if (exit.exit_code() != 0) {
      (void)std::fprintf(stderr, "dsec-vmm warm: the VM ended: %s\n", exit.describe().c_str());
    }
    return 3;
  }
  std::printf("%s\n", options.out.c_str());
  return 0;
}

}  // namespace

void add_warm_command(CLI::App& app, CommandAction& action, Clock::time_point process_start) {
  auto options = std::make_shared<WarmOptions>();
  CLI::App* warm_cmd = app.add_subcommand(
      "warm",
      "Boot an image, wait for its agent, run set-up commands and snapshot it: a warm "
      "image for dsec-vmm restore");
  warm_cmd->footer(
      "Takes run's VM options. The VM gets a vsock device (--vsock, default a socket in /run "
      "that is removed at the end) and, on the default image, dsec.agent on its command line. "
      "Once the agent answers, each --exec runs in order (/bin/sh -c; its output on stderr; a "
      "failure stops the warm-up with nothing written), then the VM is paused and written to "
      "--out as 'state' and 'memory', and stopped. Prints the directory. Exit status: 0 "
      "written, 1 bad configuration, 3 the guest or the VMM failed, 4 a thread of the VMM made "
      "a system call its seccomp filter forbids (see run --help).");
  warm_cmd->add_option("--out", options->out, "The snapshot's directory (created if missing)")
      ->required();
  add_vm_options(*warm_cmd, options->vm);
  warm_cmd
      ->add_option("--exec", options->execs,
                   "A set-up command to run in the guest before the snapshot (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_console_options(*warm_cmd, options->console);
  warm_cmd
      ->add_option("--agent-timeout", options->agent_timeout_s,
                   "Seconds to wait for the agent after the boot starts")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  warm_cmd->callback([&action, options, process_start] {
    action = [options, process_start] { return warm_main(*options, process_start); };
  });
}

}  // namespace dsec::cli

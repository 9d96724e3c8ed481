// `dsec-vmm serve --api-sock PATH`: a fresh VMM with no VM, waiting on its API socket for
// PUT /snapshot/load (Firecracker's way of starting a clone); it then runs that VM to its
// end, as `dsec-vmm restore` does.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "vmm/api/api_service.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/seccomp_option.h"
#include "vmm/cli/serve_vm.h"
#include "vmm/io/signal_watcher.h"

namespace dsec::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ServeCommandOptions {
  ApiOptions api;
  ConsoleOptions console;
  double agent_timeout_s = 30;
  seccomp::Mode seccomp = seccomp::Mode::kOn;
};

int serve_main(const ServeCommandOptions& options, Clock::time_point process_start) {
  api::MachineBackend::LoadSettings settings;
  settings.host.process_start = process_start;
  auto console = open_console(options.console, settings.host, true);
  if (!console) {
    (void)std::fprintf(stderr, "dsec-vmm serve: %s\n", console.error().message().c_str());
    return 1;
  }
  auto seccomp = seccomp::policy_for(options.seccomp);
  if (!seccomp) {
    (void)std::fprintf(stderr, "dsec-vmm serve: %s\n", seccomp.error().message().c_str());
    return 1;
  }
  settings.host.seccomp = *seccomp;
  settings.agent_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.agent_timeout_s * 1000));

  // Before any thread, as serve_vm does: only the watcher sees these.
  io::BlockedSignals signals{SIGINT, SIGTERM, SIGUSR1};
  auto service = api::ApiService::bind(options.api.socket, options.api.id);
  if (!service) {
    (void)std::fprintf(stderr, "dsec-vmm serve: %s\n", service.error().message().c_str());
    return 1;
  }
  if (auto serving = (*service)->serve(std::make_unique<api::MachineBackend>(settings)); !serving) {
    (void)std::fprintf(stderr, "dsec-vmm serve: %s\n", serving.error().message().c_str());
    return 3;
  }
  api::MachineBackend& backend = *(*service)->backend();
  const seccomp::Policy& policy = settings.host.seccomp;
  auto watcher = io::SignalWatcher::start(
      signals,
      [&backend](int signo) {
        if (signo == SIGUSR1) {
          if (auto* vm = backend.vm()) {
            vm->log_state();
          }
          return;
        }
        backend.stop(signo == SIGINT ? "received SIGINT" : "received SIGTERM");
      },
      [&backend, &policy] {
        auto filtered = policy.apply(seccomp::Role::kSignals);
        if (!filtered) {
          backend.stop("the signals thread: " + filtered.error().message());
        }
        return filtered;
      });
  if (!watcher) {
    (void)std::fprintf(stderr, "dsec-vmm serve: %s\n", watcher.error().message().c_str());
    return 3;
  }
  // Every thread of this VMM is started (the VM's come from the API thread's load).
  if (auto filtered = policy.apply(seccomp::Role::kMain); !filtered) {
    (void)std::fprintf(stderr, "dsec-vmm serve: %s\n", filtered.error().message().c_str());
    backend.stop("the main thread: " + filtered.error().message());
    return 3;
  }
  machine::Machine* vm = backend.wait_for_vm();
  if (vm == nullptr) {
    spdlog::info("serve: stopped before a snapshot was loaded");
    return 0;
  }
  const machine::VmExit exit = vm->wait();
  (*service)->stop();
  if (backend.clone_sync_failed()) {
    spdlog::error("VM ended: its agent did not take fresh entropy and the host's clock");
    return 3;
  }
  return report_exit(exit);
}

}  // namespace

void add_serve_command(CLI::App& app, CommandAction& action, Clock::time_point process_start) {
  auto options = std::make_shared<ServeCommandOptions>();
  CLI::App* serve = app.add_subcommand(
      "serve", "Start a fresh VMM that waits on its API socket for a snapshot to load");
  serve->footer(
      "The VMM has no VM until PUT /snapshot/load (docs/api.md) restores one: a copy-on-write "
      "clone, as dsec-vmm restore makes, with the load's vsock_override and network_overrides. "
      "With resume_vm it runs at once, else it waits paused for PATCH /vm Resumed; before it "
      "first runs its agent gets fresh entropy and the host's clock (a clone whose agent does "
      "not answer in --agent-timeout is stopped). The VMM then runs that VM to its end and "
      "exits with run's statuses (3 also when the agent did not answer); a second load is "
      "refused. SIGINT/SIGTERM end it, with or without a VM (status 0).");
  serve->add_option("--api-sock", options->api.socket, "The API's Unix socket (created here)")
      ->required();
  options->api.id = api::ApiService::kDefaultInstanceId;
  serve->add_option("--id", options->api.id, "The instance id the API reports (GET /)")
      ->capture_default_str();
  add_console_options(*serve, options->console);
  add_seccomp_option(*serve, options->seccomp);
  serve
      ->add_option("--agent-timeout", options->agent_timeout_s,
                   "Seconds a loaded clone's agent has to take its entropy and clock")
      ->capture_default_str();
  serve->callback([&action, options, process_start] {
    action = [options, process_start] { return serve_main(*options, process_start); };
  });
}

}  // namespace dsec::cli

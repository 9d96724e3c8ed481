// `dsec-vmm serve`: a fresh VMM, as Firecracker starts one. With --api-sock it waits on
// its API for a boot (its configuration, then PUT /actions InstanceStart) or a snapshot
// load (PUT /snapshot/load, Firecracker's way of starting a clone), and then runs that VM
// to its end, as `dsec-vmm run` or `restore` does. With --config-file it boots the VM the
// file describes at once, serving the API (if any) for that running VM.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "vmm/api/api_service.h"
#include "vmm/api/config_file.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/log_output.h"
#include "vmm/cli/seccomp_option.h"
#include "vmm/cli/serve_command.h"
#include "vmm/cli/serve_vm.h"
#include "vmm/cli/vm_signals.h"
#include "vmm/io/signal_watcher.h"
#include "vmm/seccomp/role.h"

namespace dsec::cli {
namespace {

using Clock = std::chrono::steady_clock;

// What the host decides of any VM this VMM runs: its console (--console and its limit,
// already opened into `host`), the process start and the seccomp policy.
Status host_settings(const ServeCommandOptions& options, machine::MachineConfig& host,
                     Clock::time_point process_start) {
  host.process_start = process_start;
  host.seccomp = DSEC_TRY(seccomp::policy_for(options.seccomp));
  return ok();
}

// Prints "dsec-vmm <command>: <message>" on stderr and returns `status`.
int failed(const ServeCommandOptions& options, const Error& error, int status) {
  (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command, error.message().c_str());
  return status;
}

// --config-file: the file's VM and its metrics path (or --metrics-path's), its logger
// configured first.
Result<std::pair<machine::MachineConfig, std::string>> config_file_vm(
    const ServeCommandOptions& options) {
  const std::string& path = options.config_file;
  const auto file = DSEC_TRY(api::read_config_file(path));
  if (const auto& logger = file.logger; logger.has_value()) {
    if (auto logged = configure_log(*logger); !logged) {
      return std::unexpected(logged.error().with_context("--config-file " + path + ": logger"));
    }
  }
  if (file.metrics_path && !options.metrics_path.empty()) {
    return fail("--config-file " + path + ": \"metrics\" and --metrics-path both name the metrics",
                "give one of them: the metrics are configured once, as in Firecracker");
  }
  auto vm = DSEC_TRY(file.preboot.boot_config());
  if (vm.mmds) {
    // The API's store too (ApiOptions::mmds), so that PUT /mmds reaches the guest.
    vm.mmds->service = options.api.mmds ? options.api.mmds : std::make_shared<mmds::Mmds>();
    vm.mmds->service->configure(vm.mmds->version, vm.mmds->imds_compat);
  }
  return std::pair{std::move(vm), file.metrics_path.value_or(options.metrics_path)};
}

// --config-file: the file's VM, booted at once and run to its end as `run` does.
int boot_config_file(const ServeCommandOptions& options, const machine::MachineConfig& host,
                     Clock::time_point process_start) {
  auto config = config_file_vm(options);
  if (!config) {
    return failed(options, config.error(), 1);
  }
  auto& [vm_config, metrics_path] = *config;
  machine::take_host_settings(vm_config, host);
  return serve_vm([&vm_config] { return machine::Machine::create(vm_config); },
                  {.command = options.command,
                   .metrics_file = {},
                   .before_start = {},
                   .after_start = {},
                   .api = options.no_api ? ApiOptions{} : options.api,
                   .api_metrics_path = metrics_path},
                  process_start);
}

}  // namespace

int serve_main(const ServeCommandOptions& options, Clock::time_point process_start) {
  if (options.api.socket.empty() && !options.no_api) {
    return failed(options, Error("give --api-sock PATH, or --no-api with --config-file"), 1);
  }
  // First, as Firecracker does: what the VMM logs from here on goes there too.
  if (options.logger) {
    if (auto logged = configure_log(*options.logger); !logged) {
      return failed(options, logged.error(), 1);
    }
  }
  machine::MachineConfig host;
  auto console = open_console(options.console, host, true);
  const Status settled =
      console ? host_settings(options, host, process_start) : std::unexpected(console.error());
  if (!settled) {
    return failed(options, settled.error(), 1);
  }
  if (!options.config_file.empty()) {
    return boot_config_file(options, host, process_start);
  }
  api::MachineBackend::LoadSettings settings;
  settings.host = host;
  settings.agent_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.agent_timeout_s * 1000));
  settings.configure_logger = configure_log;

  // Before any thread, as serve_vm does: only the watcher sees these.
  DSEC_BLOCK_VM_SIGNALS(signals);
  auto service =
      api::ApiService::bind(options.api.socket, options.api.id, options.api.max_body_bytes);
  if (!service) {
    return failed(options, service.error(), 1);
  }
  const seccomp::Policy& policy = settings.host.seccomp;
  // The API thread parses every request from a caller, so its filter goes in before it
  // reads the first one: it builds no VM (the main thread does, in run_builds()).
  if (auto launched = (*service)->launch([&policy] { return policy.apply(seccomp::Role::kApi); });
      !launched) {
    return failed(options, launched.error(), 3);
  }
  auto fresh = std::make_unique<api::MachineBackend>(settings);
  if (!options.metrics_path.empty()) {
    if (auto opened = fresh->configure_metrics(options.metrics_path); !opened) {
      return failed(options, opened.error(), 1);
    }
  }
  if (auto serving = (*service)->serve(std::move(fresh), options.api.mmds); !serving) {
    return failed(options, serving.error(), 3);
  }
  api::MachineBackend& backend = *(*service)->backend();
  auto watcher = io::SignalWatcher::start(
      signals,
      [&backend](int signo) {
        if (!take_look_signal(backend.vm(), signo)) {
          backend.stop(signo == SIGINT ? "received SIGINT" : "received SIGTERM");
        }
      },
      [&backend, &policy] {
        auto filtered = policy.apply(seccomp::Role::kSignals);
        if (!filtered) {
          backend.stop("the signals thread: " + filtered.error().message());
        }
        return filtered;
      });
  if (!watcher) {
    return failed(options, watcher.error(), 3);
  }
  // This thread builds and starts the VM that the API's boot or load asks for (the API
  // thread's filter allows no VM to be made); every thread of the VMM runs then, and this
  // one takes its own filter.
  machine::Machine* vm = backend.run_builds();
  if (vm == nullptr) {
    spdlog::info("serve: stopped before a VM was started or loaded");
    return 0;
  }
  if (auto filtered = policy.apply(seccomp::Role::kMain); !filtered) {
    (void)failed(options, filtered.error(), 3);
    backend.stop("the main thread: " + filtered.error().message());
    vm->wait();
    (*service)->stop();
    return 3;
  }
  const machine::VmExit exit = vm->wait();
  (*service)->stop();
  if (backend.clone_sync_failed()) {
    spdlog::error("VM ended: its agent did not take fresh entropy and the host's clock");
    return 3;
  }
  return report_exit(exit);
}

void add_serve_command(CLI::App& app, CommandAction& action, Clock::time_point process_start) {
  auto options = std::make_shared<ServeCommandOptions>();
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Start a fresh VMM, as Firecracker does: configured and started through its API socket, "
      "loaded from a snapshot through it, or booted from a --config-file");
  serve->footer(
      "With --api-sock and no --config-file the VMM has no VM until its API (Firecracker's "
      "paths and JSON, docs/api.md) gives it one: either a boot, configured with PUT "
      "/boot-source, /machine-config, /drives/{id}, /network-interfaces/{id}, /vsock, "
      "/entropy, /logger and /metrics and started with PUT /actions InstanceStart; or a "
      "snapshot, "
      "restored by PUT /snapshot/load as a copy-on-write clone like dsec-vmm restore makes, "
      "with the load's vsock_override and network_overrides (with resume_vm it runs at once, "
      "else it waits paused for PATCH /vm Resumed; before it first runs its agent gets fresh "
      "entropy and the host's clock, and a clone whose agent does not answer in "
      "--agent-timeout is stopped). A load is refused once a boot was configured. With "
      "--config-file, Firecracker's JSON configuration (boot-source, drives, machine-config, "
      "network-interfaces, vsock, entropy, logger, metrics) boots at once, and the API, unless "
      "--no-api, serves that running VM (and writes the metrics: not with --no-api). With PUT "
      "/metrics or the file's metrics, a JSON line of Firecracker's metrics goes to that file "
      "or FIFO every 60 s and at each FlushMetrics. The VMM then runs its VM to its end and exits "
      "with "
      "run's statuses (3 also when a loaded clone's agent did not answer; 1 for a bad "
      "--config-file); a second start or load is refused. SIGINT/SIGTERM end it, with or "
      "without a VM (status 0); SIGUSR1 and SIGUSR2 act as for run.");
  serve->add_option("--api-sock", options->api.socket,
                    "The API's Unix socket (created here; needed unless --no-api)");
  options->api.id = api::ApiService::kDefaultInstanceId;
  serve->add_option("--id", options->api.id, "The instance id the API reports (GET /)")
      ->capture_default_str();
  auto* config_file = serve->add_option(
      "--config-file", options->config_file,
      "Boot the VM this file describes (Firecracker's JSON configuration) at once");
  serve
      ->add_flag("--no-api", options->no_api,
                 "Serve no API socket (needs --config-file), as Firecracker's --no-api")
      ->needs(config_file)
      ->excludes("--api-sock");
  add_console_options(*serve, options->console);
  add_seccomp_option(*serve, options->seccomp);
  serve
      ->add_option("--agent-timeout", options->agent_timeout_s,
                   "Seconds a loaded clone's agent has to take its entropy and clock")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  serve->callback([&action, options, process_start] {
    action = [options, process_start] { return serve_main(*options, process_start); };
  });
}

}  // namespace dsec::cli

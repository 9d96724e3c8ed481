#include "vmm/cli/serve_vm.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "vmm/api/api_service.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/log_output.h"
#include "vmm/cli/vm_signals.h"
#include "vmm/common/metrics_sink.h"
#include "vmm/io/signal_watcher.h"
#include "vmm/seccomp/role.h"

namespace dsec::cli {
namespace {

// "start" is main()'s first line; main_monotonic_ns is that moment on CLOCK_MONOTONIC
// (steady_clock), so that a caller who noted the clock before exec can add the exec itself.
void write_metrics(const std::string& path, const machine::MachineMetrics& m,
                   const machine::VmExit& exit,
                   std::chrono::steady_clock::time_point process_start) {
  auto us = [](const std::optional<std::chrono::nanoseconds>& d) -> nlohmann::json {
    if (!d) {
      return nullptr;
    }
    return std::chrono::duration_cast<std::chrono::microseconds>(*d).count();
  };
  const auto main_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(process_start.time_since_epoch());
  nlohmann::json j = {{"main_monotonic_ns", main_ns.count()},
                      {"start_to_first_kvm_run_us", us(m.start_to_first_kvm_run)},
                      {"start_to_userspace_us", us(m.start_to_userspace)},
                      {"vmm_rss_excluding_guest_kib", m.vmm_rss_kib},
                      {"exit", exit.describe()},
                      {"exit_code", exit.exit_code()}};
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) {
    spdlog::error("could not write the metrics file {}", path);
  }
}

}  // namespace

void add_api_options(CLI::App& command, ApiOptions& options, const std::string& what) {
  options.id = api::ApiService::kDefaultInstanceId;
  command.add_option("--api-sock", options.socket,
                     "Serve the VM's API (Firecracker's paths and JSON, docs/api.md) on this Unix "
                     "socket; " +
                         what +
                         ". Created with owner-only permissions and removed at exit; refused if "
                         "a live VMM serves it already");
  command.add_option("--id", options.id, "The instance id the API reports (GET /)")
      ->capture_default_str();
}

void add_console_options(CLI::App& command, ConsoleOptions& options) {
  command.add_option("--console", options.path,
                     "Write the guest's console to this file instead of stdout");
  command
      .add_option("--console-limit", options.limit,
                  "How much console output the --console file takes (bytes, or with a unit: "
                  "256KiB, 64MiB, 1GiB; kB and MB are powers of 1000), after which the rest "
                  "is dropped (logged once); 0: no limit")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("64MiB");
  command
      .add_option("--log-limit", options.log_limit,
                  "How much of its own log the VMM writes to stderr (bytes, or with a unit as "
                  "--console-limit), after which one line says so and the rest is dropped; 0: "
                  "no limit")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("0");
}

Result<UniqueFd> open_console(const ConsoleOptions& options, machine::MachineConfig& config,
                              bool input) {
  limit_stderr_log(options.log_limit);
  config.console_input_fd =
      input && (::isatty(STDIN_FILENO) || options.path.empty()) ? STDIN_FILENO : -1;
  if (options.path.empty()) {
    return UniqueFd();
  }
  UniqueFd fd(::open(options.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) {
    return fail_errno("cannot open --console " + options.path, errno, "check the directory exists");
  }
  config.console_output_fd = fd.get();
  config.console_output_limit = options.limit;
  return fd;
}

int serve_vm(const std::function<Result<std::unique_ptr<machine::Machine>>()>& build,
             const ServeOptions& options, std::chrono::steady_clock::time_point process_start) {
  // Blocked before the Machine starts any thread, so that only the watcher sees them.
  DSEC_BLOCK_VM_SIGNALS(signals);
  std::unique_ptr<api::ApiService> bound_api;
  if (!options.api.socket.empty()) {
    auto bound =
        api::ApiService::bind(options.api.socket, options.api.id, options.api.max_body_bytes);
    if (!bound) {
      (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                         bound.error().message().c_str());
      return 1;
    }
    bound_api = std::move(*bound);
  }
  // Opened before any thread's seccomp filter, as PUT /metrics opens it before the boot.
  std::optional<MetricsSink> metrics_sink;
  if (!options.api_metrics_path.empty()) {
    auto opened =
        bound_api ? MetricsSink::open(options.api_metrics_path)
                  : Result<MetricsSink>(fail("\"metrics\" needs the API thread, which writes them",
                                             "leave out --no-api, or the \"metrics\" section"));
    if (!opened) {
      (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                         opened.error().message().c_str());
      return 1;
    }
    metrics_sink = std::move(*opened);
  }
  auto vm = build();
  if (!vm) {
    (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command, vm.error().message().c_str());
    return 1;
  }
  if (options.before_start) {
    if (auto done = options.before_start(**vm); !done) {
      (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                         done.error().message().c_str());
      return 1;
    }
  }
  // After the Machine: destroyed, and its API thread stopped, before the Machine goes.
  const std::unique_ptr<api::ApiService> api_service = std::move(bound_api);
  // Declared after the Machine: it is joined before the Machine goes.
  auto watcher = io::SignalWatcher::start(
      signals,
      [&vm = **vm](int signo) {
        if (!take_look_signal(&vm, signo)) {
          vm.stop(signo == SIGINT ? "received SIGINT" : "received SIGTERM");
        }
      },
      [&vm = **vm] { return vm.install_thread_filter(seccomp::Role::kSignals); });
  if (!watcher) {
    (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                       watcher.error().message().c_str());
    return 3;
  }
  // Every thread starts before the VM runs, the API's too (it waits to serve until the
  // end of after_start): once the main thread's seccomp filter is in, it starts no more.
  if (api_service) {
    if (auto launched = api_service->launch(
            [&vm = **vm] { return vm.install_thread_filter(seccomp::Role::kApi); });
        !launched) {
      (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                         launched.error().message().c_str());
      return 3;
    }
  }
  if (auto started = (*vm)->start(); !started) {
    (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                       started.error().message().c_str());
    return 1;
  }
  if (auto filtered = (*vm)->install_thread_filter(seccomp::Role::kMain); !filtered) {
    (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                       filtered.error().message().c_str());
    (*vm)->wait();
    return 3;
  }
  if (options.after_start) {
    if (auto done = options.after_start(**vm); !done) {
      (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                         done.error().message().c_str());
      (*vm)->stop("the VMM failed: " + done.error().message());
      (*vm)->wait();
      return 3;
    }
  }
  if (api_service) {
    auto backend = std::make_unique<api::MachineBackend>(**vm);
    if (metrics_sink) {
      backend->use_metrics_sink(std::move(*metrics_sink));
    }
    if (auto serving = api_service->serve(std::move(backend), options.api.mmds); !serving) {
      (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", options.command,
                         serving.error().message().c_str());
      (*vm)->stop("the API failed: " + serving.error().message());
      (*vm)->wait();
      return 3;
    }
  }
  machine::VmExit exit = (*vm)->wait();
  if (api_service) {
    api_service->stop();  // no request reaches a VM that has ended
  }
  // metrics() reads /proc/self/smaps: only when asked for, it is on the way to the exit.
  if (!options.metrics_file.empty()) {
    write_metrics(options.metrics_file, (*vm)->metrics(), exit, process_start);
  }
  return report_exit(exit);
}

int report_exit(const machine::VmExit& exit) {
  if (exit.exit_code() == 0) {
    spdlog::info("VM ended: {}", exit.describe());
  } else {
    spdlog::error("VM ended: {} (exit status {})", exit.describe(), exit.exit_code());
  }
  return exit.exit_code();
}

}  // namespace dsec::cli

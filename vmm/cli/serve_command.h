// What `dsec-vmm serve` runs, shared with `dsec-vmm firecracker` (firecracker.cpp), which
// fills the same options from Firecracker's command line.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "vmm/api/preboot_requests.h"
#include "vmm/cli/serve_vm.h"
#include "vmm/seccomp/policy.h"

namespace dsec::cli {

struct ServeCommandOptions {
  const char* command = "serve";  // for messages: "dsec-vmm <command>: ..."
  ApiOptions api;
  bool no_api = false;
  std::string config_file;
  ConsoleOptions console;
  double agent_timeout_s = 30;
  seccomp::Mode seccomp = seccomp::Mode::kOn;
  // The VMM's log, configured before anything else as PUT /logger configures it
  // (Firecracker's --log-path, --level, --show-level, --show-log-origin); nullopt: stderr.
  std::optional<api::LoggerRequest> logger;
  // The metrics file or FIFO, opened before anything starts as PUT /metrics opens it
  // (Firecracker's --metrics-path); empty: none.
  std::string metrics_path;
};

// Runs the VMM: a fresh one on its API, or the --config-file's VM; returns the exit status
// `dsec-vmm serve --help` documents.
int serve_main(const ServeCommandOptions& options,
               std::chrono::steady_clock::time_point process_start);

}  // namespace dsec::cli

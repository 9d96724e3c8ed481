// Runs a VM to its end for a command (`run`, `restore`): SIGINT/SIGTERM stop it, SIGUSR1
// logs its state, and its exit becomes the process's exit status.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/machine/machine.h"

namespace dsec::cli {

struct ServeOptions {
  const char* command = "run";  // for messages: "dsec-vmm <command>: ..."
  std::string metrics_file;     // boot figures as JSON when the VM ends; empty: none
  // Called once the VM runs, on the main thread; an Error stops the VM (exit status 3).
  std::function<Status(machine::Machine&)> after_start;
};

// Opens `path` (created or truncated) for the guest's console; an empty path: an empty fd
// (the console stays on stdout).
Result<UniqueFd> open_console(const std::string& path);

// Builds the VM with `build` (signals blocked first, so that no thread of the VM sees
// them), starts it and waits for its end. Returns the exit status `dsec-vmm run --help`
// documents.
int serve_vm(const std::function<Result<std::unique_ptr<machine::Machine>>()>& build,
             const ServeOptions& options, std::chrono::steady_clock::time_point process_start);

}  // namespace dsec::cli

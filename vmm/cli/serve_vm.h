// Runs a VM to its end for a command (`run`, `restore`): SIGINT/SIGTERM stop it, SIGUSR1
// logs its state, and its exit becomes the process's exit status.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/machine/machine.h"
#include "vmm/mmds/mmds.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

// --api-sock and --id: the VMM's API (docs/api.md).
struct ApiOptions {
  std::string socket;         // empty: no API
  std::string id;             // GET /'s "id"
  size_t max_body_bytes = 0;  // the largest request body taken; 0: the server's default
  // The metadata service's store (Firecracker's --metadata, --mmds-size-limit); nullptr: a
  // new, empty one with the default limit.
  std::shared_ptr<mmds::Mmds> mmds{};
};
// Registers them on `command`; `what` ends --api-sock's description.
void add_api_options(CLI::App& command, ApiOptions& options, const std::string& what);

struct ServeOptions {
  const char* command = "run";  // for messages: "dsec-vmm <command>: ..."
  std::string metrics_file;     // boot figures as JSON when the VM ends; empty: none
  // Called once the VM is built, before any of its threads start (a jail's lock-down); an
  // Error ends the command (exit status 1).
  std::function<Status(machine::Machine&)> before_start;
  // Called once the VM runs, on the main thread; an Error stops the VM (exit status 3).
  std::function<Status(machine::Machine&)> after_start;
  // The API socket, served once the VM runs and after_start succeeded.
  ApiOptions api;
  // Firecracker's metrics lines (--config-file's "metrics"), written by the API thread;
  // empty: none. Needs the API socket.
  std::string api_metrics_path;
};

// --console, --console-limit and --log-limit (run, warm, restore, serve): where the VM's
// outputs go and how much of them.
struct ConsoleOptions {
  static constexpr uint64_t kDefaultLimit = uint64_t{64} << 20;
  std::string path;                // empty: the console stays on stdout
  uint64_t limit = kDefaultLimit;  // bytes; 0: none
  uint64_t log_limit = 0;          // the VMM's own log on stderr, bytes; 0: none
};
void add_console_options(CLI::App& command, ConsoleOptions& options);

// Caps the VMM's log on stderr at --log-limit. Opens --console (created or truncated) and
// points `config`'s console at it, with its size limit; without --console the output stays on
// stdout, unlimited. With `input`, the guest reads stdin when stdin is a terminal or the output is
// stdout. Returns the file (an empty fd for stdout), which must outlive the VM.
Result<UniqueFd> open_console(const ConsoleOptions& options, machine::MachineConfig& config,
                              bool input);

// Builds the VM with `build` (signals blocked first, so that no thread of the VM sees
// them; the API socket bound before, so that a path in use fails at once), starts it and
// waits for its end. Returns the exit status `dsec-vmm run --help`
// documents.
int serve_vm(const std::function<Result<std::unique_ptr<machine::Machine>>()>& build,
             const ServeOptions& options, std::chrono::steady_clock::time_point process_start);

// Logs how the VM ended and returns the exit status that stands for it.
int report_exit(const machine::VmExit& exit);

}  // namespace dsec::cli

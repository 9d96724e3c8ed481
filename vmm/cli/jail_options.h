// --jail and its options, shared by `dsec-vmm run` and `dsec-vmm restore` (docs/jail.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vmm/cli/serve_vm.h"
#include "vmm/common/error.h"
#include "vmm/jail/jail_config.h"
#include "vmm/jail/jail_paths.h"
#include "vmm/jail/jailed_process.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

struct JailOptions {
  std::string dir;  // empty: no jail
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<std::string> cgroup;  // FILE=VALUE
  std::string cgroup_parent = "dsec-vmm";
  uint64_t max_open_files = 2048;
  bool no_supervisor = false;  // --jail-no-supervisor: started as pid 1 by its reaper

  bool enabled() const { return !dir.empty(); }
};

// Registers the options above on `command`.
void add_jail_options(CLI::App& command, JailOptions& options);

// A jail as asked for: its configuration (checked) and its paths.
struct Jail {
  jail::JailConfig config;
  jail::JailPaths paths;
  bool supervised = true;  // false: --jail-no-supervisor (jail::run_jailed_as_pid1)
};
Result<Jail> jail_of(const JailOptions& options);

// Runs `jailed` in `jail`: under a supervisor (jail::run_jailed), or as the pid 1 its reaper
// started (jail::run_jailed_as_pid1). `command` names the subcommand in errors.
int run_in_jail(const Jail& jail, const char* command,
                const std::function<int(jail::JailedProcess&)>& jailed);

// The paths every VM command has, for a jailed VMM: the console is opened before the
// pivot (made absolute); the metrics file and the API socket are used after it (inside
// the jail, made relative to it).
Status jail_serve_paths(const jail::JailPaths& paths, std::string& console,
                        std::string& metrics_file, ApiOptions& api);

// ServeOptions::before_start for a jailed VMM: locks `process` down once the VM is built,
// its vsock socket (which the VMM connects to itself) given to the jail's ids.
std::function<Status(machine::Machine&)> lock_down_before_start(jail::JailedProcess& process);

}  // namespace dsec::cli

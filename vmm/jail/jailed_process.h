// The jailed side of a jailed VMM (docs/jail.md): pid 1 of new pid, mount, IPC, UTS and
// network namespaces, in its cgroup, working in its jail directory. It opens what the VM
// needs from the host, then locks itself down before any guest code runs.
#pragma once

#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/jail/jail_config.h"

namespace dsec::jail {

class JailedProcess {
 public:
  // In the child the supervisor forked (jail/supervisor.h), once in its cgroup: closes
  // every inherited descriptor above stderr but config.kept_fds and `supervisor_alive`
  // (whose other end only the supervisor holds), dies with the supervisor (without one,
  // `supervisor_alive` empty: run_jailed_as_pid1, it dies with nobody), makes its own
  // mount, IPC, UTS and network namespaces (the network one unless
  // config.own_network_namespace is false), makes every mount private to them,
  // bind-mounts the jail directory onto itself and works there.
  static Result<JailedProcess> enter(const JailConfig& config, UniqueFd supervisor_alive);

  // Once every file the VM needs from outside the jail is open: pivot_root into the jail
  // directory and detach the host's tree; the jail's mount nosuid, nodev, noexec;
  // RLIMIT_NOFILE config.max_open_files, RLIMIT_CORE 0; `owned_paths` (relative to the
  // jail: sockets the VMM connects to itself) given to config.uid:gid; then those ids,
  // with no supplementary groups and so no capabilities, and no_new_privs. Called before
  // the VM's threads start: no guest code runs before it.
  Status lock_down(const std::vector<std::string>& owned_paths);

 private:
  JailedProcess(const JailConfig& config, UniqueFd supervisor_alive)
      : config_(config), supervisor_alive_(std::move(supervisor_alive)) {}

  // PR_SET_PDEATHSIG, then a check that the supervisor did not die before it.
  Status die_with_supervisor() const;

  const JailConfig& config_;
  UniqueFd supervisor_alive_;
};

}  // namespace dsec::jail

// The supervisor of a jailed VMM (docs/jail.md): the process that was started stays
// outside the jail, makes the cgroup, forks the jailed VMM into new namespaces and waits
// for it.
#pragma once

#include <signal.h>

#include <functional>

#include "vmm/jail/jail_config.h"
#include "vmm/jail/jailed_process.h"

namespace dsec::jail {

// Exit statuses of a jailed command beyond the command's own (0 to 4: 4 is seccomp).
inline constexpr int kExitOomKilled = 5;  // the OOM killer of its cgroup killed it (memory.max)
inline constexpr int kExitKilled = 6;     // another signal killed it

// Runs `jailed` in a child that JailedProcess::enter() put in its jail, as pid 1 of a new
// pid namespace and in the cgroup made for it (Cgroup::create). Must be called while this
// process is single-threaded. Here, SIGINT, SIGTERM and SIGUSR1 are passed on to the child
// (blocked in it until the VMM reads them); when it ends the cgroup is removed. Returns
// the child's exit status (`jailed`'s value), kExitOomKilled or kExitKilled, or 1 when
// the jail could not be made (the reason on stderr, after "dsec-vmm <command>: ").
int run_jailed(const JailConfig& config, const char* command,
               const std::function<int(JailedProcess&)>& jailed);

// The forwarded signals above (SIGINT, SIGTERM, SIGUSR1, SIGUSR2).
sigset_t forwarded_signals();

// The same jail with no supervisor, for a process that its parent started as pid 1 of a new
// pid namespace with the forwarded signals blocked (the pool's launcher: posix_spawn after
// unshare(CLONE_NEWPID)). That parent reaps it; whoever started it signals it directly,
// reads its cgroup's memory.events to tell an OOM kill, and removes its cgroup
// (cgroup_path(config)) once it ended: made and entered here, the cgroup is left in place.
// Saves the supervisor's process (about 0.2 MiB) per jailed VMM. Returns `jailed`'s value,
// or 1 when the jail could not be made (the reason on stderr, as run_jailed).
int run_jailed_as_pid1(const JailConfig& config, const char* command,
                       const std::function<int(JailedProcess&)>& jailed);

}  // namespace dsec::jail

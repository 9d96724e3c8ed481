// Pause, resume and snapshot of a pool sandbox, through its VMM's API socket
// (`dsec-vmm restore --api-sock`), with the API client's steps (vmm/api/vm_control.h).
// Blocking; the pool runs them on a thread of their own (background_task.h).
#pragma once

#include <chrono>
#include <string>

#include "vmm/common/error.h"

namespace dsec::pool {

// How long one request to a clone's API may take: a snapshot writes the guest's memory.
inline constexpr std::chrono::milliseconds kSandboxApiTimeout{120'000};

// PATCH /vm {"state": "Paused"} or "Resumed".
Status set_sandbox_paused(const std::string& api_socket, bool paused);

// Writes the sandbox's snapshot into `dir` (it must exist, empty) as a warm image that
// restores like `dsec-vmm warm`'s: its files `state` and `memory`. A running sandbox is
// paused for it and resumed after, also when the snapshot failed.
// A jailed sandbox's VMM (`jail_dir` its jail directory; empty: not jailed) writes only
// inside its jail, its root: into a directory made there for it, owned by the jail's uid,
// from which the daemon copies the files into `dir`, into files of its own (the VMM's uid
// could hold the ones it wrote open), and which it then removes.
Status snapshot_sandbox(const std::string& api_socket, const std::string& dir, bool paused,
                        const std::string& jail_dir);

}  // namespace dsec::pool

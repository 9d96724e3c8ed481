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

// Writes the sandbox's snapshot as a warm image that restores like `dsec-vmm warm`'s: new
// files `state` and `memory` (mode 0600, the daemon's) in the directory `target` (a
// descriptor: the image store's staging directory, image_store.h). A running sandbox is
// paused for it and resumed after, also when the snapshot failed.
// The VMM writes only into a directory made for it in `sandbox_dir` (for a jailed sandbox its
// jail, its root, and the directory owned by the jail's uid; `jailed` says which), from which
// the daemon copies the files through a descriptor of that directory, never following a link
// nor waiting on a FIFO, into files of its own (the VMM's uid could hold the ones it wrote
// open), and which it then removes. The VMM never names a path in the store.
Status snapshot_sandbox(const std::string& api_socket, const std::string& sandbox_dir, bool jailed,
                        bool paused, int target);

}  // namespace dsec::pool

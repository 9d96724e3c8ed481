// What a restored clone needs before it is handed out: its own entropy and the host's wall
// clock, through its agent (agent::sync_clone; docs/snapshots.md). `dsec-vmm restore` and
// the API's snapshot load share it.
#pragma once

#include <chrono>

#include "vmm/common/error.h"
#include "vmm/machine/machine.h"

namespace dsec::machine {

// Syncs the running clone `vm` through its agent, waiting at most `timeout` for the agent
// to answer. A VM without a vsock device has no agent: it runs with the snapshot's RNG
// state and clock, which is logged, not failed.
Status sync_restored_clone(Machine& vm, std::chrono::milliseconds timeout);

}  // namespace dsec::machine

// What a host does with a sandbox's agent around a boot or a restore: wait until it
// answers, and give a restored clone its own entropy and the host's wall clock.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "vmm/common/error.h"

namespace dsec::agent {

// Asks the agent behind the vsock Unix socket `uds_path` for its health until it answers,
// for at most `timeout`; `vm_running` is asked between tries, and a VM that ended fails
// the wait at once.
Status wait_for_agent(const std::string& uds_path, std::chrono::milliseconds timeout,
                      const std::function<bool()>& vm_running);

// Sends a restored clone's agent 64 fresh bytes from the host's getrandom() and the host's
// CLOCK_REALTIME (clone-sync, docs/agent-protocol.md), retrying for at most `timeout` while
// the agent does not answer yet.
Status sync_clone(const std::string& uds_path, std::chrono::milliseconds timeout,
                  const std::function<bool()>& vm_running);

}  // namespace dsec::agent

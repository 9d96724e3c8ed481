// The guest agent's listener and its one loop: accepts connections on a vsock port, answers
// the requests about kept processes itself (they live in its process table, past any one
// connection), and serves every other request in a child process of its own (session.h),
// so that one request's crash or hang touches no other.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

struct ServeOptions {
  std::string agent_version = kAgentVersion;
  // When readable (or closed at its other end), serve() returns "stopped": for tests,
  // which run the agent on the host. -1: never.
  int stop_fd = -1;
};

// A vsock socket listening on `port` (any CID). Host connections queue on it from here on,
// before serve() runs: init listens first and prints its banner after.
Result<UniqueFd> listen_vsock(uint32_t port);

// Serves the connections of `listener` (vsock, or a Unix socket in tests) until a fatal
// error or the stop fd, which it returns as a message. Reaps its children, and any orphan
// re-parented to it as PID 1. The processes it kept are killed when it returns.
std::string serve(UniqueFd listener, const ServeOptions& options = {});

}  // namespace dsec::agent

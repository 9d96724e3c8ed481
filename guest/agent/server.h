// The guest agent's listener: accepts connections on a vsock port and serves each in a
// child process of its own (session.h), so one request's crash or hang touches no other.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

// A vsock socket listening on `port` (any CID). Host connections queue on it from here on,
// before serve() runs: init listens first and prints its banner after.
Result<UniqueFd> listen_vsock(uint32_t port);

// Serves the connections of `listener` until a fatal error, which it returns as a message.
// Reaps its children, and any orphan re-parented to it as PID 1.
std::string serve(UniqueFd listener);

}  // namespace dsec::agent

// One agent connection: reads one request (docs/agent-protocol.md), carries it out and
// answers it. Runs in a process of its own per connection (the agent forks), so a request
// that crashes or hangs takes nothing else with it. Host-testable over a socketpair.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/agent/frame_io.h"

namespace dsec::agent {

struct SessionOptions {
  std::string agent_version = kAgentVersion;
};

// Serves the request arriving on `fd` (a connected stream socket) and returns when it is
// answered or the connection failed; never throws, never exits the process. Returns 0 when
// the request was answered, 1 otherwise (the reason went to stderr).
// Milliseconds since the guest booted (CLOCK_BOOTTIME), as health-ok reports them.
uint64_t uptime_ms();

int serve_connection(int fd, const SessionOptions& options = {});

// The same for a request whose first frame the caller has read already: `reader` holds
// whatever arrived after it (the stdin an exec's host sent at once).
int serve_request(int fd, FrameReader& reader, const Frame& first,
                  const SessionOptions& options = {});

}  // namespace dsec::agent

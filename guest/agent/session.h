// One agent connection: reads one request (docs/agent-protocol.md), carries it out and
// answers it. Runs in a process of its own per connection (the agent forks), so a request
// that crashes or hangs takes nothing else with it. Host-testable over a socketpair.
#pragma once

#include <cstdint>
#include <string>

namespace dsec::agent {

struct SessionOptions {
  std::string agent_version = "dsec-agent 1";
};

// Serves the request arriving on `fd` (a connected stream socket) and returns when it is
// answered or the connection failed; never throws, never exits the process. Returns 0 when
// the request was answered, 1 otherwise (the reason went to stderr).
int serve_connection(int fd, const SessionOptions& options = {});

}  // namespace dsec::agent

// envd's process.Process service (spec/envd/process/process.proto) on the agent's kept
// processes (docs/agent-protocol.md, "Processes"): Start and Connect (server streams of
// start, data and end events), List, SendInput, CloseStdin, SendSignal and Update (a
// terminal's size). A process is named by pid or by tag; one the agent does not keep is
// not_found. StreamInput, a client stream, cannot be served over HTTP/1.1: unimplemented.
//
// A stream's events are emitted as they happen: start once the process runs, data as its
// output comes from the agent (no faster than the client reads it: the agent keeps what
// waits, in its bounded buffer), end when it ends. A client that goes away ends the stream;
// the process runs on, and Connect follows it again.
#pragma once

#include <vector>

#include "vmm/e2b/envd_service.h"

namespace dsec::e2b {

std::vector<EnvdMethod> process_methods();

// Start's request as the agent's: process.cmd then process.args as argv, envs (after the
// sandbox's own) and cwd, the caller's user, tag, stdin, and a pty's size.
ConnectResult<agent::ProcessStartRequest> start_request(const nlohmann::json& request,
                                                        const EnvdCaller& caller);

}  // namespace dsec::e2b

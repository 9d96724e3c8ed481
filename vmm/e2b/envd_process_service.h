// envd's process.Process service (spec/envd/process/process.proto) on the agent's kept
// processes (docs/agent-protocol.md, "Processes"): Start and Connect (server streams of
// start, data and end events), List, SendInput, CloseStdin, SendSignal and Update (a
// terminal's size). A process is named by pid or by tag; one the agent does not keep is
// not_found. StreamInput, a client stream, cannot be served over HTTP/1.1: unimplemented.
//
// A stream's events are collected until the process ends and then sent in one answer (the
// pool's HTTP server answers whole responses): up to kMaxStreamOutputBytes of output, past
// which the rest is dropped and the end event's error says how much.
#pragma once

#include <vector>

#include "vmm/e2b/envd_service.h"

namespace dsec::e2b {

inline constexpr size_t kMaxStreamOutputBytes = size_t{16} * 1024 * 1024;

std::vector<EnvdMethod> process_methods();

// Start's request as the agent's: process.cmd then process.args as argv, envs (after the
// sandbox's own) and cwd, the caller's user, tag, stdin, and a pty's size.
ConnectResult<agent::ProcessStartRequest> start_request(const nlohmann::json& request,
                                                        const EnvdCaller& caller);

}  // namespace dsec::e2b

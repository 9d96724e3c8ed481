// An exec in a pool sandbox, through its agent (vmm/agent's client over its vsock socket):
// the command's output collected up to a bound, its exit status, and both as the JSON the
// pool API answers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"
#include "vmm/pool/pool_requests.h"

namespace dsec::pool {

// Output kept per stream; the rest is counted and dropped (both streams fit one answer
// of the API).
inline constexpr size_t kMaxExecOutputBytes = size_t{256} * 1024;

struct CollectedStream {
  std::string text;
  uint64_t dropped = 0;  // bytes past kMaxExecOutputBytes
};

struct ExecOutcome {
  agent::ExitStatus status;
  CollectedStream out;
  CollectedStream err;
};

Result<ExecOutcome> exec_in_sandbox(const std::string& vsock, const ExecCall& call);
nlohmann::json exec_outcome_json(const ExecOutcome& outcome);

}  // namespace dsec::pool

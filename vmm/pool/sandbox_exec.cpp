#include "vmm/pool/sandbox_exec.h"

#include <algorithm>
#include <memory>

#include "vmm/agent/client.h"
#include "vmm/agent/connection_cutter.h"

namespace dsec::pool {
namespace {

agent::Sink collect_into(CollectedStream& stream) {
  return [&stream](std::span<const uint8_t> bytes) -> Status {
    const size_t room = kMaxExecOutputBytes - std::min(kMaxExecOutputBytes, stream.text.size());
    const size_t kept = std::min(room, bytes.size());
    stream.text.append(reinterpret_cast<const char*>(bytes.data()), kept);
    stream.dropped += bytes.size() - kept;
    return ok();
  };
}

const char* kind_name(agent::ExitStatus::Kind kind) {
  switch (kind) {
    case agent::ExitStatus::Kind::kExited:
      return "exited";
    case agent::ExitStatus::Kind::kSignaled:
      return "signaled";
    case agent::ExitStatus::Kind::kTimedOut:
      return "timed_out";
  }
  return "?";
}

}  // namespace

Result<ExecOutcome> exec_in_sandbox(const std::string& vsock, const ExecCall& call) {
  // Its connections are shut at once when its client leaves: the blocked exec then fails,
  // and the guest's agent, its host gone, kills the command.
  const auto connections = std::make_shared<agent::ConnectionCutter>();
  if (call.client) {
    call.client->on_gone(agent::ConnectionCutter::stopper(connections));
  }
  agent::AgentClient client(agent::cuttable_vsock_uds(vsock, connections));
  ExecOutcome outcome;
  const auto stdin_bytes =
      std::span(reinterpret_cast<const uint8_t*>(call.stdin_data.data()), call.stdin_data.size());
  outcome.status = DSEC_TRY(
      client.exec(call.request, collect_into(outcome.out), collect_into(outcome.err), stdin_bytes));
  return outcome;
}

nlohmann::json exec_outcome_json(const ExecOutcome& outcome) {
  return {{"exit", {{"kind", kind_name(outcome.status.kind)}, {"code", outcome.status.code}}},
          {"stdout", outcome.out.text},
          {"stderr", outcome.err.text},
          {"stdout_dropped_bytes", outcome.out.dropped},
          {"stderr_dropped_bytes", outcome.err.dropped}};
}

}  // namespace dsec::pool

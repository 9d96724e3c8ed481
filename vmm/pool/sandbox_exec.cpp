#include "vmm/pool/sandbox_exec.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "vmm/agent/client.h"
#include "vmm/common/unique_fd.h"

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

// The exec's agent connections while it runs, shut at once when its client leaves: the
// blocked exec then fails, and the guest's agent, its host gone, kills the command. Each is
// a copy of the connection's descriptor, closed with this object (the exec's end).
class ExecConnections {
 public:
  void add(int fd) {
    UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    const std::lock_guard lock(mutex_);
    if (stopped_ && copy) {
      ::shutdown(copy.get(), SHUT_RDWR);
    }
    copies_.push_back(std::move(copy));
  }
  void stop() {
    const std::lock_guard lock(mutex_);
    stopped_ = true;
    for (const UniqueFd& copy : copies_) {
      ::shutdown(copy.get(), SHUT_RDWR);
    }
  }

 private:
  std::mutex mutex_;
  bool stopped_ = false;
  std::vector<UniqueFd> copies_;
};

}  // namespace

Result<ExecOutcome> exec_in_sandbox(const std::string& vsock, const ExecCall& call) {
  const auto connections = std::make_shared<ExecConnections>();
  if (call.client) {
    call.client->on_gone([weak = std::weak_ptr(connections)] {
      if (const auto alive = weak.lock()) {
        alive->stop();
      }
    });
  }
  agent::AgentClient client([vsock, connections]() -> Result<UniqueFd> {
    auto fd = DSEC_TRY(agent::connect_vsock_uds(vsock, agent::kAgentPort));
    connections->add(fd.get());
    return fd;
  });
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

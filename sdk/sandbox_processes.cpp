// SandboxClient's kept processes (dsec/sandbox_client.h; docs/agent-protocol.md,
// "Processes"), through the agent client's requests of the same names.
#include <limits>

#include "dsec/sandbox_client.h"
#include "sdk/agent_conversions.h"
#include "sdk/error_mapping.h"
#include "vmm/agent/client.h"

namespace dsec::sdk {

using detail::with_code;

Result<uint32_t> SandboxClient::start_process(const ProcessRequest& request) const {
  if (request.argv.empty() || request.argv.front().empty()) {
    return std::unexpected(Error(ErrorCode::kInvalidArgument, "a process needs a program"));
  }
  agent::ProcessStartRequest req{request.argv,     request.env,  request.cwd,
                                 request.tag,      request.user, request.stdin_open,
                                 request.terminal, request.rows, request.cols};
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  return with_code(client.start_process(req), ErrorCode::kAgent);
}

Result<ExitStatus> SandboxClient::attach_process(uint32_t pid, const OutputSink& on_stdout,
                                                 const OutputSink& on_stderr) const {
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  const auto status = DSEC_TRY(
      with_code(client.attach_process(pid, detail::sink_of(on_stdout), detail::sink_of(on_stderr)),
                ErrorCode::kAgent));
  return detail::exit_status_of(status);
}

Result<std::vector<ProcessInfo>> SandboxClient::list_processes() const {
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  const auto reply = DSEC_TRY(with_code(client.list_processes(), ErrorCode::kAgent));
  std::vector<ProcessInfo> out;
  out.reserve(reply.processes.size());
  for (const auto& p : reply.processes) {
    out.push_back({p.pid, p.tag, p.argv, p.running, detail::exit_status_of(p.exit), p.pty,
                   p.stdout_dropped, p.stderr_dropped});
  }
  return out;
}

Status SandboxClient::send_process_input(uint32_t pid, std::string_view data) const {
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  return with_code(client.send_process_input(pid, detail::as_bytes(data)), ErrorCode::kAgent);
}

Status SandboxClient::close_process_stdin(uint32_t pid) const {
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  return with_code(client.close_process_stdin(pid), ErrorCode::kAgent);
}

Status SandboxClient::signal_process(uint32_t pid, int signal) const {
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  return with_code(client.signal_process(pid, signal), ErrorCode::kAgent);
}

Status SandboxClient::resize_terminal(uint32_t pid, uint16_t rows, uint16_t cols) const {
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  return with_code(client.resize_process_terminal(pid, rows, cols), ErrorCode::kAgent);
}

}  // namespace dsec::sdk

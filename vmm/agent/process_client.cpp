// AgentClient's requests about kept processes, each answered by one frame (attaching to a
// process's output streams, and lives in client.cpp beside the exec it shares a loop with).
#include <algorithm>

#include "vmm/agent/client.h"

namespace dsec::agent {

Result<uint32_t> AgentClient::start_process(const ProcessStartRequest& req) {
  const Frame f = DSEC_TRY(request(MessageType::kProcessStart, encode(req),
                                   MessageType::kProcessStarted, "process start"));
  return DSEC_TRY(decode_process_ref(f.payload)).pid;
}

Result<ProcessListReply> AgentClient::list_processes() {
  const Frame f = DSEC_TRY(
      request(MessageType::kProcessList, {}, MessageType::kProcessListReply, "process list"));
  return decode_process_list_reply(f.payload);
}

Status AgentClient::send_process_input(uint32_t pid, std::span<const uint8_t> data) {
  do {
    const auto chunk = data.first(std::min<size_t>(data.size(), kMaxChunk));
    const ProcessInput m{pid, {chunk.begin(), chunk.end()}};
    DSEC_TRY(request(MessageType::kProcessInput, encode(m), MessageType::kOk, "process input"));
    data = data.subspan(chunk.size());
  } while (!data.empty());
  return ok();
}

Status AgentClient::close_process_stdin(uint32_t pid) {
  DSEC_TRY(request(MessageType::kProcessCloseStdin, encode(ProcessRef{pid}), MessageType::kOk,
                   "closing a process's stdin"));
  return ok();
}

Status AgentClient::signal_process(uint32_t pid, int signal) {
  DSEC_TRY(request(MessageType::kProcessSignal, encode(ProcessSignal{pid, signal}),
                   MessageType::kOk, "process signal"));
  return ok();
}

Status AgentClient::resize_process_terminal(uint32_t pid, uint16_t rows, uint16_t cols) {
  DSEC_TRY(request(MessageType::kProcessResize, encode(ProcessResize{pid, rows, cols}),
                   MessageType::kOk, "terminal resize"));
  return ok();
}

}  // namespace dsec::agent

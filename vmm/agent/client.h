// The host side of the agent protocol (docs/agent-protocol.md): runs commands in a sandbox
// and moves files in and out. One connection per request, opened by a Connector: through
// the vsock device's Unix socket for a running VM, or a socketpair in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

// Opens a fresh stream connected to the agent.
using Connector = std::function<Result<UniqueFd>()>;
// Receives streamed bytes (stdout, stderr, a file's contents). An Error stops the request.
using Sink = std::function<Status(std::span<const uint8_t>)>;

// How long the VMM may take to answer a vsock CONNECT before the VM counts as stuck.
inline constexpr std::chrono::milliseconds kVsockHandshakeTimeout{30000};

// Connects to a Firecracker-style vsock Unix socket and asks for guest `port`
// (`CONNECT <port>\n`, answered `OK <n>\n` within `handshake_timeout`); the stream is
// then the guest's, with no timeout on it.
Result<UniqueFd> connect_vsock_uds(
    const std::string& uds_path, uint32_t port,
    std::chrono::milliseconds handshake_timeout = kVsockHandshakeTimeout);

// Connects straight to guest `cid`:`port` over AF_VSOCK: for VMMs whose vsock is
// vhost-vsock (QEMU), where the host side is the kernel's.
Result<UniqueFd> connect_vsock(uint32_t cid, uint32_t port);

// Makes a read on `fd` fail with EAGAIN after `timeout` without data (0: never).
Status set_receive_timeout(int fd, std::chrono::milliseconds timeout);

class AgentClient {
 public:
  explicit AgentClient(Connector connector) : connector_(std::move(connector)) {}

  Result<HealthReply> health();
  // Gives a restored clone's guest fresh entropy and the host's wall clock
  // (CloneSyncRequest); before anything else runs in the clone.
  Status clone_sync(const CloneSyncRequest& req);
  // Runs req; stdin_data (when req.stdin_open) is sent and then closed.
  Result<ExitStatus> exec(const ExecRequest& req, const Sink& on_stdout, const Sink& on_stderr,
                          std::span<const uint8_t> stdin_data = {});
  // Copies `size` bytes read from `source_fd` into guest_path with `mode`.
  Status write_file(int source_fd, uint64_t size, const std::string& guest_path, uint32_t mode);
  // Streams guest_path into `sink`; returns what the guest said of the file.
  Result<FileInfo> read_file(const std::string& guest_path, const Sink& sink);

 private:
  Connector connector_;
  uint32_t next_id_ = 1;
};

}  // namespace dsec::agent

// The host side of the agent protocol (docs/agent-protocol.md): runs commands in a sandbox
// and moves files in and out. One connection per request, opened by a Connector: through
// the vsock device's Unix socket for a running VM, or a socketpair in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "vmm/agent/fs_protocol.h"
#include "vmm/agent/process_protocol.h"
#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

// Opens a fresh stream connected to the agent.
using Connector = std::function<Result<UniqueFd>()>;
// Receives streamed bytes (stdout, stderr, a file's contents). An Error stops the request.
using Sink = std::function<Status(std::span<const uint8_t>)>;

// How long the host waits on the guest at any one step of a request unless told otherwise
// (dsec-vmm exec and cp --answer-timeout): the VMM's accept of a connection and its answer
// to CONNECT, each reply frame to arrive whole, and the guest to take each frame we send.
inline constexpr std::chrono::milliseconds kDefaultAnswerTimeout{30000};
// A file copy must also move at least this fast on the whole: it ends with an Error once
// it took the answer timeout plus its size at this rate, so that a guest that sends (or
// takes) a frame just inside each step's timeout cannot hold the copy for ever.
inline constexpr uint64_t kMinCopyBytesPerSecond = uint64_t{64} * 1024;

// Connects to a Firecracker-style vsock Unix socket and asks for guest `port`
// (`CONNECT <port>\n`, answered `OK <n>\n`): the connect and the answer each within
// `timeout`. The stream is then the guest's, with no timeout left on the socket.
Result<UniqueFd> connect_vsock_uds(const std::string& uds_path, uint32_t port,
                                   std::chrono::milliseconds timeout = kDefaultAnswerTimeout);

// Connects straight to guest `cid`:`port` over AF_VSOCK: for VMMs whose vsock is
// vhost-vsock (QEMU), where the host side is the kernel's.
Result<UniqueFd> connect_vsock(uint32_t cid, uint32_t port);

namespace client_detail {
class Stream;
}

// A guest directory watched (AgentClient::watch_directory): its events as they come. The
// watch ends in the guest when this is destroyed (its connection closes).
class DirectoryWatch {
 public:
  DirectoryWatch(std::unique_ptr<client_detail::Stream> stream, uint32_t id);
  DirectoryWatch(DirectoryWatch&&) noexcept;
  DirectoryWatch& operator=(DirectoryWatch&&) noexcept;
  ~DirectoryWatch();

  // The next event, waiting at most `wait`: nullopt when none came by then; an Error when
  // the connection broke or the guest sent something malformed.
  Result<std::optional<FsEvent>> next(std::chrono::milliseconds wait);

 private:
  std::unique_ptr<client_detail::Stream> stream_;
  uint32_t id_;
};

// Every wait on the guest is bounded by the client's answer timeout: a reply frame that is
// not whole within it, or a frame of ours the guest does not take within it, ends the
// request with an Error saying that the guest stopped answering (a health check, a clone
// sync, a file copy). An exec is the exception, since its command may run silent (or leave
// its stdin unread) for as long as it likes: when its connection stays quiet that long, the
// client asks the agent for a health check on a fresh connection, goes on waiting while
// that is answered, and fails when it is not.
class AgentClient {
 public:
  explicit AgentClient(Connector connector,
                       std::chrono::milliseconds answer_timeout = kDefaultAnswerTimeout)
      : connector_(std::move(connector)), answer_timeout_(answer_timeout) {}

  Result<HealthReply> health();
  // Gives a restored clone's guest fresh entropy and the host's wall clock
  // (CloneSyncRequest); before anything else runs in the clone.
  Status clone_sync(const CloneSyncRequest& req);
  // Runs req; stdin_data (when req.stdin_open) is sent and then closed.
  Result<ExitStatus> exec(const ExecRequest& req, const Sink& on_stdout, const Sink& on_stderr,
                          std::span<const uint8_t> stdin_data = {});
  // Copies `size` bytes read from `source_fd` into guest_path with `mode`.
  Status write_file(int source_fd, uint64_t size, const std::string& guest_path, uint32_t mode);
  // Streams guest_path into `sink`; returns what the guest said of the file. `on_info`, if
  // given, hears the guest's file-info (size and mode) before any data; an Error from it
  // stops the copy. A guest that sends more than the size it announced fails the copy at
  // the frame that goes past it; one that sends less, at its file-end.
  Result<FileInfo> read_file(const std::string& guest_path, const Sink& sink,
                             const std::function<Status(const FileInfo&)>& on_info = {});

  // Kept processes (docs/agent-protocol.md, "Processes"; vmm/agent/process_client.cpp):
  // they outlive the connection that started them, so each call is a connection of its own.
  // Starts one; its pid.
  Result<uint32_t> start_process(const ProcessStartRequest& req);
  // Streams a kept process's output from the first byte no one has read, then live, until
  // it ends; its exit. Closing the connection (an Error from a sink) leaves it running.
  Result<ExitStatus> attach_process(uint32_t pid, const Sink& on_stdout, const Sink& on_stderr);
  Result<ProcessListReply> list_processes();
  // Writes `data` to its stdin, in frames of at most kMaxChunk bytes.
  Status send_process_input(uint32_t pid, std::span<const uint8_t> data);
  Status close_process_stdin(uint32_t pid);
  // Sends `signal` to its process group.
  Status signal_process(uint32_t pid, int signal);
  Status resize_process_terminal(uint32_t pid, uint16_t rows, uint16_t cols);

  // The guest's file system (docs/agent-protocol.md, "File system"; fs_client.cpp).
  // What `path` is (not following a symlink).
  Result<FsEntry> stat(const std::string& path);
  // The entries under directory `path`, `depth` levels deep (1: its own entries).
  Result<std::vector<FsEntry>> list_directory(const std::string& path, uint32_t depth = 1);
  // Makes directory `path` and its missing parents; false when it was there already.
  Result<bool> make_directory(const std::string& path);
  Status move_path(const std::string& from, const std::string& to);
  // Removes `path`, and all under it when it is a directory.
  Status remove_path(const std::string& path);
  // Watches directory `path` (and, with `recursive`, those under it) for files created,
  // written, removed, renamed or changed in mode; the watch is set when this returns.
  Result<DirectoryWatch> watch_directory(const std::string& path, bool recursive = false);

  std::chrono::milliseconds answer_timeout() const { return answer_timeout_; }

 private:
  // One request on a connection of its own, answered by one frame of type `answer` (an
  // error frame becomes an Error).
  Result<Frame> request(MessageType type, std::span<const uint8_t> payload, MessageType answer,
                        const char* during);

  // Whether the agent still answers (a health check on a fresh connection), for an exec
  // whose own connection stayed quiet for the answer timeout.
  Status still_answering(const char* during);

  Connector connector_;
  std::chrono::milliseconds answer_timeout_;
  uint32_t next_id_ = 1;
};

// A client of the agent behind a VM's vsock Unix socket (its --vsock), each connection and
// each step of a request within `answer_timeout`.
AgentClient vsock_uds_client(const std::string& uds_path,
                             std::chrono::milliseconds answer_timeout = kDefaultAnswerTimeout);

}  // namespace dsec::agent

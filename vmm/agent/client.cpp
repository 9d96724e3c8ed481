#include "vmm/agent/client.h"

#include <fmt/format.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <vector>

#include "vmm/agent/client_stream.h"
#include "vmm/agent/frame_io.h"

namespace dsec::agent {
namespace {

using namespace client_detail;
Status set_socket_timeout(int fd, int option, std::chrono::milliseconds timeout) {
  const timeval tv{.tv_sec = static_cast<time_t>(timeout.count() / 1000),
                   .tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  if (::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv) != 0) {
    return fail_errno("setsockopt(SO_RCVTIMEO/SO_SNDTIMEO) on a vsock connection", errno);
  }
  return ok();
}

// The end of a whole copy of `size` bytes that began now (kMinCopyBytesPerSecond).
class CopyDeadline {
 public:
  CopyDeadline(uint64_t size, std::chrono::milliseconds answer_timeout)
      : size_(size),
        end_(Clock::now() + answer_timeout +
             // At most about 11 days: a size the guest announced cannot overflow the clock.
             std::chrono::milliseconds(
                 std::min<uint64_t>(size / (kMinCopyBytesPerSecond / 1000), 1'000'000'000))) {}
  Status check(const std::string& guest_path, uint64_t moved) const {
    if (Clock::now() < end_) {
      return ok();
    }
    return fail(fmt::format("copying {}: {} of {} bytes moved by the copy's deadline (it must "
                            "move {} KiB a second on the whole, after the answer timeout)",
                            guest_path, moved, size_, kMinCopyBytesPerSecond / 1024),
                kStoppedAnsweringHint);
  }

 private:
  uint64_t size_;
  Clock::time_point end_;
};

// An exec's or an attached process's output, then its exit.
Result<ExitStatus> receive_output(Stream& stream, uint32_t id, const char* during,
                                  const Stalled& stalled, const std::function<Status()>& check,
                                  const Sink& on_stdout, const Sink& on_stderr) {
  while (true) {
    const Frame f = DSEC_TRY(stream.receive(during, stalled));
    DSEC_TRY(check());
    if (f.request_id != id) {
      return fail("agent protocol: an answer for request " + std::to_string(f.request_id));
    }
    switch (f.type) {
      case MessageType::kStdout:
        DSEC_TRY(on_stdout(f.payload));
        break;
      case MessageType::kStderr:
        DSEC_TRY(on_stderr(f.payload));
        break;
      case MessageType::kExit:
        return decode_exit_status(f.payload);
      default:
        return unexpected_frame(f, during);
    }
  }
}

}  // namespace

Result<UniqueFd> connect_vsock_uds(const std::string& uds_path, uint32_t port,
                                   std::chrono::milliseconds timeout) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail_errno("socket(AF_UNIX)", errno);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (uds_path.size() >= sizeof addr.sun_path) {
    return fail("the vsock socket path '" + uds_path +
                "' is longer than a Unix socket path may be");
  }
  std::memcpy(addr.sun_path, uds_path.c_str(), uds_path.size() + 1);
  // A Unix stream connect waits while the listener's backlog is full, which is a VMM that
  // stopped accepting; the send timeout bounds that wait (and the CONNECT line's write).
  DSEC_TRY(set_socket_timeout(fd.get(), SO_SNDTIMEO, timeout));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno == EAGAIN) {
      return fail("the VM's vsock socket " + uds_path + " did not accept a connection within " +
                      seconds(timeout),
                  "the VM may be stuck: `kill -USR1` its dsec-vmm to log where its devices stand");
    }
    return fail_errno("connect to the VM's vsock socket " + uds_path, errno,
                      "is the VM running with this vsock socket?");
  }
  // The VMM answers CONNECT as soon as the guest accepts or refuses: a socket silent past
  // the timeout belongs to a stuck VM, and the caller hears so instead of waiting for ever.
  DSEC_TRY(set_socket_timeout(fd.get(), SO_RCVTIMEO, timeout));
  const std::string hello = "CONNECT " + std::to_string(port) + "\n";
  DSEC_TRY(
      write_all(fd.get(), std::span(reinterpret_cast<const uint8_t*>(hello.data()), hello.size())));
  // The answer is one line; read it byte by byte so nothing of the stream after it is taken.
  std::string line;
  while (line.size() < 64) {
    char c = 0;
    const ssize_t n = ::read(fd.get(), &c, 1);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return fail("the VM's vsock socket " + uds_path +
                      " did not answer a connection to guest port " + std::to_string(port) +
                      " within " + seconds(timeout),
                  "the VM may be stuck: `kill -USR1` its dsec-vmm to log where its devices stand");
    }
    if (n <= 0) {
      break;
    }
    if (c == '\n') {
      if (line.rfind("OK ", 0) == 0) {
        // The stream's own waits are the client's (AgentClient), not the socket's.
        DSEC_TRY(set_socket_timeout(fd.get(), SO_RCVTIMEO, std::chrono::milliseconds(0)));
        DSEC_TRY(set_socket_timeout(fd.get(), SO_SNDTIMEO, std::chrono::milliseconds(0)));
        return fd;
      }
      break;
    }
    line += c;
  }
  return fail("the VM's vsock socket " + uds_path + " refused a connection to guest port " +
                  std::to_string(port) + (line.empty() ? "" : " (it said '" + line + "')"),
              "is the guest agent running and listening on that port?");
}

Result<UniqueFd> connect_vsock(uint32_t cid, uint32_t port) {
  UniqueFd fd(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail_errno("socket(AF_VSOCK)", errno, "is the vsock module loaded (vhost_vsock)?");
  }
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = cid;
  addr.svm_port = port;
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return fail_errno("connect to vsock " + std::to_string(cid) + ":" + std::to_string(port), errno,
                      "is the guest running with that CID, and its agent listening?");
  }
  return fd;
}

Result<HealthReply> AgentClient::health() {
  constexpr const char* kDuring = "health check";
  const Stalled stalled = give_up(kDuring, answer_timeout_);
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(MessageType::kHealth, id, {}, stalled));
  const Frame f = DSEC_TRY(stream.receive(kDuring, stalled));
  if (f.type != MessageType::kHealthOk) {
    return unexpected_frame(f, kDuring);
  }
  return decode_health_reply(f.payload);
}

Status AgentClient::clone_sync(const CloneSyncRequest& req) {
  constexpr const char* kDuring = "clone sync";
  const Stalled stalled = give_up(kDuring, answer_timeout_);
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(MessageType::kCloneSync, id, encode(req), stalled));
  const Frame f = DSEC_TRY(stream.receive(kDuring, stalled));
  if (f.type != MessageType::kOk) {
    return unexpected_frame(f, kDuring);
  }
  return ok();
}

Status AgentClient::still_answering(const char* during) {
  if (auto health_reply = health(); !health_reply) {
    return fail(fmt::format("the guest stopped answering: the {}'s connection was quiet for {}, "
                            "and a health check on a fresh connection failed ({})",
                            during, seconds(answer_timeout_), health_reply.error().message()),
                kStoppedAnsweringHint);
  }
  return ok();
}

Result<ExitStatus> AgentClient::exec(const ExecRequest& req, const Sink& on_stdout,
                                     const Sink& on_stderr, std::span<const uint8_t> stdin_data) {
  constexpr const char* kDuring = "exec";
  // A command with a time limit ends by then, killed by the agent if need be: an exit that
  // has not come an answer timeout later will not come (a frame lost on the way, an agent
  // session stuck), and the caller (the pool's one thread, say) must not wait for ever.
  std::optional<Clock::time_point> exit_deadline;
  if (req.timeout_ms > 0) {
    exit_deadline = Clock::now() + std::chrono::milliseconds(req.timeout_ms) + answer_timeout_;
  }
  const auto before_exit_deadline = [&]() -> Status {
    if (exit_deadline && Clock::now() >= *exit_deadline) {
      return fail(fmt::format("the guest agent did not report the end of the command within its "
                              "time limit ({} ms) and {} more",
                              req.timeout_ms, seconds(answer_timeout_)),
                  kStoppedAnsweringHint);
    }
    return ok();
  };
  // The command decides when its output comes and when it reads its stdin: a quiet
  // connection is a problem only when the agent no longer answers at all, or past the
  // deadline above.
  const Stalled stalled = [&]() -> Status {
    DSEC_TRY(before_exit_deadline());
    return still_answering(kDuring);
  };
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(MessageType::kExec, id, encode(req), stalled));
  if (req.stdin_open) {
    while (!stdin_data.empty()) {
      const auto chunk = stdin_data.first(std::min<size_t>(stdin_data.size(), kMaxChunk));
      DSEC_TRY(stream.send(MessageType::kStdin, id, chunk, stalled));
      stdin_data = stdin_data.subspan(chunk.size());
    }
    DSEC_TRY(stream.send(MessageType::kStdinClose, id, {}, stalled));
  }
  return receive_output(stream, id, kDuring, stalled, before_exit_deadline, on_stdout, on_stderr);
}

Result<ExitStatus> AgentClient::attach_process(uint32_t pid, const Sink& on_stdout,
                                               const Sink& on_stderr) {
  constexpr const char* kDuring = "process attach";
  // As for an exec: the process decides when its output comes.
  const Stalled stalled = [&]() -> Status { return still_answering(kDuring); };
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(MessageType::kProcessAttach, id, encode(ProcessRef{pid}), stalled));
  return receive_output(
      stream, id, kDuring, stalled, [] { return ok(); }, on_stdout, on_stderr);
}

Result<Frame> AgentClient::request(MessageType type, std::span<const uint8_t> payload,
                                   MessageType answer, const char* during) {
  const Stalled stalled = give_up(during, answer_timeout_);
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(type, id, payload, stalled));
  Frame f = DSEC_TRY(stream.receive(during, stalled));
  if (f.type != answer || f.request_id != id) {
    return unexpected_frame(f, during);
  }
  return f;
}

Status AgentClient::write_file(int source_fd, uint64_t size, const std::string& guest_path,
                               uint32_t mode) {
  constexpr const char* kDuring = "file copy";
  const Stalled stalled = give_up(kDuring, answer_timeout_);
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  // The agent refuses a file (no such directory, say) by answering at once and closing, so
  // a send may fail: its answer, when it is there, says why.
  const auto send_or_answer = [&](MessageType type, std::span<const uint8_t> payload) -> Status {
    if (auto s = stream.send(type, id, payload, stalled); !s) {
      if (auto f = stream.received_already()) {
        return unexpected_frame(*f, kDuring);
      }
      return s;
    }
    return ok();
  };
  DSEC_TRY(
      send_or_answer(MessageType::kWriteFile, encode(WriteFileRequest{guest_path, mode, size})));
  std::array<uint8_t, kMaxChunk> buf{};
  const CopyDeadline deadline(size, answer_timeout_);
  uint64_t sent = 0;
  while (sent < size) {
    DSEC_TRY(deadline.check(guest_path, sent));
    const ssize_t n = ::read(source_fd, buf.data(), std::min<uint64_t>(buf.size(), size - sent));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail_errno("reading the file to copy into the guest", errno);
    }
    if (n == 0) {
      return fail("the file to copy into the guest ended after " + std::to_string(sent) + " of " +
                  std::to_string(size) + " bytes");
    }
    DSEC_TRY(send_or_answer(MessageType::kFileData, std::span(buf.data(), static_cast<size_t>(n))));
    sent += static_cast<uint64_t>(n);
  }
  DSEC_TRY(send_or_answer(MessageType::kFileEnd, {}));
  const Frame f = DSEC_TRY(stream.receive(kDuring, stalled));
  DSEC_TRY(deadline.check(guest_path, sent));
  if (f.type != MessageType::kOk) {
    return unexpected_frame(f, kDuring);
  }
  return ok();
}

Result<FileInfo> AgentClient::read_file(const std::string& guest_path, const Sink& sink,
                                        const std::function<Status(const FileInfo&)>& on_info) {
  constexpr const char* kDuring = "file copy";
  const Stalled stalled = give_up(kDuring, answer_timeout_);
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(MessageType::kReadFile, id, encode(ReadFileRequest{guest_path}), stalled));
  const Frame first = DSEC_TRY(stream.receive(kDuring, stalled));
  if (first.type != MessageType::kFileInfo) {
    return unexpected_frame(first, kDuring);
  }
  const FileInfo info = DSEC_TRY(decode_file_info(first.payload));
  if (on_info) {
    DSEC_TRY(on_info(info));
  }
  // The announced size bounds what is taken: a frame past it ends the copy there, before
  // its bytes reach the sink.
  const CopyDeadline deadline(info.size, answer_timeout_);
  uint64_t received = 0;
  while (true) {
    const Frame f = DSEC_TRY(stream.receive(kDuring, stalled));
    DSEC_TRY(deadline.check(guest_path, received));
    if (f.type == MessageType::kFileEnd) {
      break;
    }
    if (f.type != MessageType::kFileData) {
      return unexpected_frame(f, kDuring);
    }
    if (f.payload.size() > info.size - received) {
      return fail(fmt::format("copying {} out of the guest: the guest sent more than the {} bytes "
                              "it announced",
                              guest_path, info.size),
                  "the guest misbehaves (its agent sends what it announced, no more); nothing "
                  "past the announced size was taken");
    }
    received += f.payload.size();
    DSEC_TRY(sink(f.payload));
  }
  if (received != info.size) {
    return fail(fmt::format("copying {} out of the guest: {} bytes arrived, the guest announced {}",
                            guest_path, received, info.size));
  }
  return info;
}

AgentClient vsock_uds_client(const std::string& uds_path,
                             std::chrono::milliseconds answer_timeout) {
  return AgentClient(
      [uds_path, answer_timeout] {
        return connect_vsock_uds(uds_path, kAgentPort, answer_timeout);
      },
      answer_timeout);
}

}  // namespace dsec::agent

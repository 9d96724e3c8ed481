#include "vmm/agent/client.h"

#include <linux/vm_sockets.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "vmm/agent/frame_io.h"

namespace dsec::agent {
namespace {

// The guest's answer to a request it refused, or a frame that should not have come.
std::unexpected<Error> unexpected_frame(const Frame& f, const char* during) {
  if (f.type == MessageType::kError) {
    auto e = decode_error_reply(f.payload);
    return fail(std::string("the guest agent refused the ") + during + ": " +
                (e ? e->message : "(an unreadable error message)"));
  }
  return fail(std::string("agent protocol: a ") +
              message_type_name(static_cast<uint16_t>(f.type)).value_or("?") +
              " frame during the " + during);
}

Result<Frame> expect_frame(FrameReader& reader, const char* during) {
  auto f = DSEC_TRY(reader.next());
  if (!f) {
    return fail(std::string("the guest agent closed the connection during the ") + during);
  }
  return std::move(*f);
}

}  // namespace

Status set_receive_timeout(int fd, std::chrono::milliseconds timeout) {
  const timeval tv{.tv_sec = static_cast<time_t>(timeout.count() / 1000),
                   .tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    return fail_errno("setsockopt(SO_RCVTIMEO) on an agent connection", errno);
  }
  return ok();
}

Result<UniqueFd> connect_vsock_uds(const std::string& uds_path, uint32_t port,
                                   std::chrono::milliseconds handshake_timeout) {
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
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return fail_errno("connect to the VM's vsock socket " + uds_path, errno,
                      "is the VM running with this vsock socket?");
  }
  // The VMM answers CONNECT as soon as the guest accepts or refuses: a socket silent past
  // the handshake timeout belongs to a stuck VM, and the caller hears so instead of waiting
  // for ever. The timeout holds for the handshake only.
  DSEC_TRY(set_receive_timeout(fd.get(), handshake_timeout));
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
                      " within " + std::to_string(handshake_timeout.count()) + " ms",
                  "the VM may be stuck: `kill -USR1` its dsec-vmm to log where its devices stand");
    }
    if (n <= 0) {
      break;
    }
    if (c == '\n') {
      if (line.rfind("OK ", 0) == 0) {
        DSEC_TRY(set_receive_timeout(fd.get(), std::chrono::milliseconds(0)));
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
  const UniqueFd fd = DSEC_TRY(connector_());
  const uint32_t id = next_id_++;
  DSEC_TRY(send_frame(fd.get(), MessageType::kHealth, id, {}));
  FrameReader reader(fd.get());
  const Frame f = DSEC_TRY(expect_frame(reader, "health check"));
  if (f.type != MessageType::kHealthOk) {
    return unexpected_frame(f, "health check");
  }
  return decode_health_reply(f.payload);
}

Status AgentClient::clone_sync(const CloneSyncRequest& req) {
  const UniqueFd fd = DSEC_TRY(connector_());
  const uint32_t id = next_id_++;
  DSEC_TRY(send_frame(fd.get(), MessageType::kCloneSync, id, encode(req)));
  FrameReader reader(fd.get());
  const Frame f = DSEC_TRY(expect_frame(reader, "clone sync"));
  if (f.type != MessageType::kOk) {
    return unexpected_frame(f, "clone sync");
  }
  return ok();
}

Result<ExitStatus> AgentClient::exec(const ExecRequest& req, const Sink& on_stdout,
                                     const Sink& on_stderr, std::span<const uint8_t> stdin_data) {
  const UniqueFd fd = DSEC_TRY(connector_());
  const uint32_t id = next_id_++;
  DSEC_TRY(send_frame(fd.get(), MessageType::kExec, id, encode(req)));
  if (req.stdin_open) {
    while (!stdin_data.empty()) {
      const auto chunk = stdin_data.first(std::min<size_t>(stdin_data.size(), kMaxChunk));
      DSEC_TRY(send_frame(fd.get(), MessageType::kStdin, id, chunk));
      stdin_data = stdin_data.subspan(chunk.size());
    }
    DSEC_TRY(send_frame(fd.get(), MessageType::kStdinClose, id, {}));
  }
  FrameReader reader(fd.get());
  while (true) {
    const Frame f = DSEC_TRY(expect_frame(reader, "exec"));
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
        return unexpected_frame(f, "exec");
    }
  }
}

Status AgentClient::write_file(int source_fd, uint64_t size, const std::string& guest_path,
                               uint32_t mode) {
  const UniqueFd fd = DSEC_TRY(connector_());
  const uint32_t id = next_id_++;
  FrameReader reader(fd.get());
  // The agent refuses a file (no such directory, say) by answering at once and closing, so
  // a send may fail: its answer, when there is one, says why.
  const auto send_or_answer = [&](MessageType type, std::span<const uint8_t> payload) -> Status {
    if (auto s = send_frame(fd.get(), type, id, payload); !s) {
      auto f = reader.next();
      if (f && *f) {
        return unexpected_frame(**f, "file copy");
      }
      return s;
    }
    return ok();
  };
  DSEC_TRY(
      send_or_answer(MessageType::kWriteFile, encode(WriteFileRequest{guest_path, mode, size})));
  std::array<uint8_t, kMaxChunk> buf{};
  uint64_t sent = 0;
  while (sent < size) {
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
  const Frame f = DSEC_TRY(expect_frame(reader, "file copy"));
  if (f.type != MessageType::kOk) {
    return unexpected_frame(f, "file copy");
  }
  return ok();
}

Result<FileInfo> AgentClient::read_file(const std::string& guest_path, const Sink& sink) {
  const UniqueFd fd = DSEC_TRY(connector_());
  const uint32_t id = next_id_++;
  DSEC_TRY(send_frame(fd.get(), MessageType::kReadFile, id, encode(ReadFileRequest{guest_path})));
  FrameReader reader(fd.get());
  const Frame first = DSEC_TRY(expect_frame(reader, "file copy"));
  if (first.type != MessageType::kFileInfo) {
    return unexpected_frame(first, "file copy");
  }
  const FileInfo info = DSEC_TRY(decode_file_info(first.payload));
  uint64_t received = 0;
  while (true) {
    const Frame f = DSEC_TRY(expect_frame(reader, "file copy"));
    if (f.type == MessageType::kFileEnd) {
      break;
    }
    if (f.type != MessageType::kFileData) {
      return unexpected_frame(f, "file copy");
    }
    received += f.payload.size();
    DSEC_TRY(sink(f.payload));
  }
  if (received != info.size) {
    return fail("copying " + guest_path + " out of the guest: " + std::to_string(received) +
                " bytes arrived, the guest announced " + std::to_string(info.size));
  }
  return info;
}

}  // namespace dsec::agent

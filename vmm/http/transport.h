// What an HTTP connection's bytes travel through: the socket itself, or a TLS session over it
// (vmm/tls). The server (server.h) reads and writes through this interface only, and makes
// a TCP connection's transport through a TransportFactory, so that HttpConnection and the
// server's loop are the same for both, every TLS call lives in one module, and only the
// programs that speak TLS (the pool daemon) link OpenSSL: never the VMM, which every
// sandbox maps.
//
// Both kinds are non-blocking: a call that cannot go on now says kWouldBlock, and
// wanted_events() says what the transport waits for beyond what HTTP wants (a TLS session
// that must write while it reads, or read while it writes).
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::http {

struct TransportIo {
  enum class Kind {
    kDone,        // `bytes` moved (more than none)
    kWouldBlock,  // nothing now: wait for wanted_events() and what HTTP wants
    kEof,         // the peer closed its sending side (receive only)
    kFailed,      // the connection is broken: close it (failure() may say why)
  };
  Kind kind = Kind::kFailed;
  size_t bytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportIo receive(std::span<char> buffer) = 0;
  virtual TransportIo send(std::string_view bytes) = 0;
  // Poll events (POLLIN, POLLOUT) the transport waits for on its own, after a kWouldBlock.
  virtual uint32_t wanted_events() const { return 0; }
  // Whether requests may flow: a TLS session's handshake is done.
  virtual bool established() const { return true; }
  // Bytes received and held inside the transport (decrypted TLS records): readable now,
  // although the socket may have nothing for poll to see.
  virtual bool has_buffered_input() const { return false; }
  // Why the last kFailed happened, for the log; empty when the peer just went away.
  virtual std::string failure() const { return {}; }
};

// Makes the transport of each connection accepted on a listener (TLS: a session).
class TransportFactory {
 public:
  virtual ~TransportFactory() = default;
  // A transport over the accepted, non-blocking socket `fd`, which stays the caller's and
  // must outlive the transport.
  virtual Result<std::unique_ptr<Transport>> session(int fd) const = 0;
};

// The socket's bytes as they are: HTTP in the clear.
class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : fd_(fd) {}

  TransportIo receive(std::span<char> buffer) override {
    while (true) {
      const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
      if (n > 0) {
        return {.kind = TransportIo::Kind::kDone, .bytes = static_cast<size_t>(n)};
      }
      if (n == 0) {
        return {.kind = TransportIo::Kind::kEof};
      }
      if (errno != EINTR) {
        // Anything but EAGAIN: reset by the client, nobody to answer.
        return {.kind =
                    errno == EAGAIN ? TransportIo::Kind::kWouldBlock : TransportIo::Kind::kFailed};
      }
    }
  }

  TransportIo send(std::string_view bytes) override {
    while (true) {
      // MSG_NOSIGNAL: a client that went away is an EPIPE here, not a SIGPIPE for the VMM.
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        return {.kind = TransportIo::Kind::kDone, .bytes = static_cast<size_t>(n)};
      }
      if (n < 0 && errno != EINTR) {
        return {.kind =
                    errno == EAGAIN ? TransportIo::Kind::kWouldBlock : TransportIo::Kind::kFailed};
      }
      if (n == 0) {
        return {.kind = TransportIo::Kind::kFailed};
      }
    }
  }

 private:
  int fd_;  // the connection's, owned by the server
};

}  // namespace dsec::http

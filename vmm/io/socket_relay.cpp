#include "vmm/io/socket_relay.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace dsec::io {
namespace {

constexpr size_t kChunk = size_t{64} * 1024;

bool would_block(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

int poll_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// One way of the relay: bytes read from `from` and not yet written to `to`.
struct Way {
  int from;
  int to;
  std::string pending;
  size_t sent = 0;
  bool ended = false;  // `from` sent its end, and it was passed on
};

// Reads what `way.from` has; false when the relay must end (an error).
bool read_side(Way& way) {
  std::array<char, kChunk> buffer{};
  const ssize_t n = ::recv(way.from, buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (n > 0) {
    way.pending.assign(buffer.data(), static_cast<size_t>(n));
    way.sent = 0;
    return true;
  }
  if (n == 0) {
    way.ended = true;
    ::shutdown(way.to, SHUT_WR);
    return true;
  }
  return would_block(errno);
}

bool write_side(Way& way) {
  const ssize_t n = ::send(way.to, way.pending.data() + way.sent, way.pending.size() - way.sent,
                           MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0) {
    return would_block(errno);
  }
  way.sent += static_cast<size_t>(n);
  if (way.sent == way.pending.size()) {
    way.pending.clear();
    way.sent = 0;
  }
  return true;
}

}  // namespace

void relay(int a, int b, int stop_fd) {
  std::array<Way, 2> ways{Way{.from = a, .to = b, .pending = {}, .sent = 0, .ended = false},
                          Way{.from = b, .to = a, .pending = {}, .sent = 0, .ended = false}};
  while (!(ways[0].ended && ways[1].ended)) {
    std::array<pollfd, 3> fds{pollfd{.fd = a, .events = 0, .revents = 0},
                              pollfd{.fd = b, .events = 0, .revents = 0},
                              pollfd{.fd = stop_fd, .events = POLLIN, .revents = 0}};
    for (size_t i = 0; i < 2; ++i) {
      Way& way = ways[i];
      pollfd& from = fds[i];
      pollfd& to = fds[1 - i];
      if (!way.pending.empty()) {
        to.events |= POLLOUT;
      } else if (!way.ended) {
        from.events |= POLLIN;
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return;
    }
    if (fds[2].revents != 0) {
      return;
    }
    bool progressed = false;
    for (size_t i = 0; i < 2; ++i) {
      Way& way = ways[i];
      const short from_ready = fds[i].revents;
      const short to_ready = fds[1 - i].revents;
      if (!way.pending.empty() && (to_ready & (POLLOUT | POLLERR | POLLHUP)) != 0) {
        if (!write_side(way)) {
          return;
        }
        progressed = true;
      } else if (way.pending.empty() && !way.ended &&
                 (from_ready & (POLLIN | POLLERR | POLLHUP)) != 0) {
        if (!read_side(way)) {
          return;
        }
        progressed = true;
      }
    }
    // A socket in error or hung up that neither way can use any more: nothing else comes.
    if (!progressed && ((fds[0].revents | fds[1].revents) & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
      return;
    }
  }
}

Result<UniqueFd> connect_tcp(const std::string& address, uint16_t port,
                             std::chrono::milliseconds timeout, int stop_fd) {
  const std::string where = fmt::format("{}:{}", address, port);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sin.sin_addr) != 1) {
    return fail(fmt::format("'{}' is no IPv4 address", address));
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return fail_errno("socket", errno);
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof sin) == 0) {
    return fd;
  }
  if (errno != EINPROGRESS) {
    return fail(fmt::format("cannot connect to {}: {}", where, std::strerror(errno)));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::array<pollfd, 2> fds{pollfd{.fd = fd.get(), .events = POLLOUT, .revents = 0},
                              pollfd{.fd = stop_fd, .events = POLLIN, .revents = 0}};
    const int ready = ::poll(fds.data(), fds.size(), poll_ms(deadline));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready < 0) {
      return fail_errno("poll", errno);
    }
    if (fds[1].revents != 0) {
      return fail(fmt::format("connecting to {}: stopped", where));
    }
    if (ready == 0) {
      return fail(
          fmt::format("{} did not accept a connection within {} ms", where, timeout.count()));
    }
    break;
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    return fail(fmt::format("cannot connect to {}: {}", where, std::strerror(err)));
  }
  return fd;
}

Status send_all(int fd, std::string_view bytes, std::chrono::milliseconds timeout, int stop_fd) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && !would_block(errno)) {
      return fail_errno("send", errno);
    }
    std::array<pollfd, 2> fds{pollfd{.fd = fd, .events = POLLOUT, .revents = 0},
                              pollfd{.fd = stop_fd, .events = POLLIN, .revents = 0}};
    const int ready = ::poll(fds.data(), fds.size(), poll_ms(deadline));
    if (ready == 0) {
      return fail("the peer read nothing in time");
    }
    if (ready > 0 && fds[1].revents != 0) {
      return fail("stopped");
    }
  }
  return ok();
}

}  // namespace dsec::io

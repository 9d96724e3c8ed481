#include "vmm/devices/virtio/vsock/host_listener.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "vmm/devices/virtio/vsock/unix_socket.h"

namespace dsec::virtio::vsock {

HostListener::HostListener(io::EventLoop& loop, std::string path, Guard guard, Connected connected,
                           std::chrono::milliseconds handshake_timeout)
    : loop_(loop),
      path_(std::move(path)),
      guard_(std::move(guard)),
      connected_(std::move(connected)),
      handshake_timeout_(handshake_timeout),
      own_pid_(::getpid()) {}

Result<std::unique_ptr<HostListener>> HostListener::create(
    io::EventLoop& loop, std::string path, Guard guard, Connected connected,
    std::chrono::milliseconds handshake_timeout) {
  auto bound = listen_unix(path);
  if (!bound) {
    return std::unexpected(bound.error().with_context("vsock"));
  }
  UniqueFd listener = std::move(*bound);
  std::unique_ptr<HostListener> host(new HostListener(loop, std::move(path), std::move(guard),
                                                      std::move(connected), handshake_timeout));
  host->listener_ = std::move(listener);
  // On failure, the destructor removes the socket file.
  host->listener_watch_ = DSEC_TRY(loop.add_fd_watch(
      host->listener_.get(), [h = host.get()] { h->guard_([h] { h->on_listener_ready(); }); }));
  return host;
}

HostListener::~HostListener() {
  close_pending();
  purge();
  if (listener_watch_) {
    static_cast<void>(loop_.remove_watch(*listener_watch_));
  }
  ::unlink(path_.c_str());
}

void HostListener::close_pending() {
  held_.clear();
  for (auto& [id, pending] : pending_) {
    closed_.push_back(std::move(pending));
  }
  pending_.clear();
}

void HostListener::purge() {
  for (Pending& pending : closed_) {
    forget(pending);
  }
  closed_.clear();
}

void HostListener::forget(Pending& pending) {
  if (pending.watch) {
    static_cast<void>(loop_.remove_watch(*pending.watch));
    pending.watch.reset();
  }
  if (pending.deadline) {
    static_cast<void>(loop_.cancel_timer(*pending.deadline));
    pending.deadline.reset();
  }
}

UniqueFd HostListener::take(uint64_t id) {
  const auto it = pending_.find(id);
  if (it == pending_.end()) {
    return UniqueFd();
  }
  forget(it->second);
  UniqueFd fd = std::move(it->second.fd);
  pending_.erase(it);
  return fd;
}

void HostListener::on_listener_ready() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && log_limiter_.allow()) {
        spdlog::warn("vsock: accept on {}: {}", path_, std::strerror(errno));
      }
      return;
    }
    if (!open_ || pending_.size() + held_.size() >= kMaxPending) {
      continue;  // closed: the host sees EOF before any "OK"
    }
    if (own_only_ && !from_own_process(fd.get())) {
      held_.push_back(std::move(fd));
      continue;
    }
    admit(std::move(fd));
  }
}

bool HostListener::from_own_process(int fd) const {
  ucred peer{};
  socklen_t size = sizeof peer;
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && peer.pid == own_pid_;
}

void HostListener::admit_only_own(bool only) {
  own_only_ = only;
  if (only) {
    return;
  }
  std::vector<UniqueFd> held = std::move(held_);
  held_.clear();
  for (UniqueFd& fd : held) {
    admit(std::move(fd));
  }
}

void HostListener::admit(UniqueFd fd) {
  const uint64_t id = next_id_++;
  Pending pending{std::move(fd), std::nullopt, std::nullopt};
  auto watch = loop_.add_fd_watch(pending.fd.get(),
                                  [this, id] { guard_([this, id] { on_pending_ready(id); }); });
  auto deadline = loop_.add_timer(handshake_timeout_, [this, id] {
    guard_([this, id] {
      if (auto it = pending_.find(id); it != pending_.end()) {
        it->second.deadline.reset();  // it fired: nothing to cancel
        take(id);
      }
    });
  });
  pending.watch = watch ? std::optional(*watch) : std::nullopt;
  pending.deadline = deadline ? std::optional(*deadline) : std::nullopt;
  if (!watch || !deadline) {
    forget(pending);
    return;
  }
  pending_.emplace(id, std::move(pending));
}

void HostListener::on_pending_ready(uint64_t id) {
  const auto it = pending_.find(id);
  if (it == pending_.end()) {
    return;
  }
  const int fd = it->second.fd.get();
  // Peek, so that bytes after the line stay in the socket as the stream's first data.
  std::array<char, kMaxConnectLine> line{};
  const ssize_t peeked = ::recv(fd, line.data(), line.size(), MSG_PEEK);
  if (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return;
  }
  if (peeked <= 0) {
    take(id);  // EOF or an error before a whole line
    return;
  }
  const std::string_view seen(line.data(), static_cast<size_t>(peeked));
  const size_t newline = seen.find('\n');
  if (newline == std::string_view::npos) {
    // A peek of part of a line does not show EOF behind it; poll does.
    pollfd hangup{.fd = fd, .events = POLLRDHUP, .revents = 0};
    if (seen.size() == line.size() ||
        (::poll(&hangup, 1, 0) > 0 && (hangup.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)) {
      take(id);  // no line of a sane length, or none to come
    }
    return;  // the rest of the line is yet to come
  }
  const std::optional<uint32_t> port = parse_connect_line(seen.substr(0, newline + 1));
  if (!port || ::recv(fd, line.data(), newline + 1, 0) != static_cast<ssize_t>(newline + 1)) {
    take(id);
    return;
  }
  connected_(take(id), *port);
}

}  // namespace dsec::virtio::vsock

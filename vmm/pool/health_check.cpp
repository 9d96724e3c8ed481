#include "vmm/pool/health_check.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace dsec::pool {
namespace {

constexpr const char* kClosedWithoutAnswer =
    "the VMM closed the connection without an answer: the guest refused the agent's port, or "
    "the VMM gave up on it";

// The VMM's answer is "OK <host port>\n"; anything longer is not that answer.
constexpr size_t kMaxAnswer = 64;

HealthVerdict verdict(Health health, std::string why) {
  return HealthVerdict{.health = health, .why = std::move(why)};
}

}  // namespace

std::unique_ptr<HealthCheck> HealthCheck::start(io::EventLoop& loop, const std::string& vsock_path,
                                                uint32_t port, std::chrono::milliseconds timeout,
                                                Done done) {
  std::unique_ptr<HealthCheck> check(new HealthCheck(loop, std::move(done)));
  if (auto failed = check->ask(vsock_path, port)) {
    check->finish_soon(std::move(*failed));
    return check;
  }
  auto watch = loop.add_fd_watch(check->socket_.get(), [c = check.get()] { c->on_readable(); });
  if (!watch) {
    check->finish_soon(verdict(Health::kUnchecked, "no watch: " + watch.error().message()));
    return check;
  }
  check->watch_ = *watch;
  auto timer = loop.add_timer(timeout, [c = check.get()] { c->on_deadline(); });
  if (!timer) {
    (void)loop.remove_watch(*watch);
    check->watch_.reset();
    check->finish_soon(verdict(Health::kUnchecked, "no timer: " + timer.error().message()));
    return check;
  }
  check->timer_ = *timer;
  return check;
}

HealthCheck::~HealthCheck() {
  if (watch_) {
    (void)loop_.remove_watch(*watch_);
  }
  if (timer_) {
    (void)loop_.cancel_timer(*timer_);
  }
}

std::optional<HealthVerdict> HealthCheck::ask(const std::string& vsock_path, uint32_t port) {
  socket_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket_) {
    return verdict(Health::kUnchecked, fmt::format("socket: {}", std::strerror(errno)));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (vsock_path.size() >= sizeof addr.sun_path) {
    return verdict(Health::kUnchecked, "its vsock socket's path is too long: " + vsock_path);
  }
  std::memcpy(addr.sun_path, vsock_path.c_str(), vsock_path.size() + 1);
  if (::connect(socket_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    // A Unix stream socket whose listener's backlog is full says EAGAIN: a VMM that no
    // longer accepts.
    return errno == EAGAIN
               ? verdict(Health::kSilent, "its vsock socket accepts no connection")
               : verdict(Health::kRefused,
                         fmt::format("connect to its vsock socket: {}", std::strerror(errno)));
  }
  const std::string line = fmt::format("CONNECT {}\n", port);
  const ssize_t n = ::send(socket_.get(), line.data(), line.size(), MSG_NOSIGNAL);
  if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
    return verdict(Health::kRefused, kClosedWithoutAnswer);  // it closed before our line
  }
  if (n != static_cast<ssize_t>(line.size())) {
    return verdict(Health::kRefused, n < 0 ? fmt::format("send: {}", std::strerror(errno))
                                           : std::string("its vsock socket took a partial line"));
  }
  return std::nullopt;
}

std::optional<HealthVerdict> HealthCheck::read_answer() {
  std::array<char, kMaxAnswer> buffer{};
  while (true) {
    const ssize_t n = ::read(socket_.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        return std::nullopt;
      }
      if (errno != ECONNRESET) {
        return verdict(Health::kRefused, fmt::format("read: {}", std::strerror(errno)));
      }
    }
    if (n <= 0) {  // the end, or a reset: the VMM closed before it read our line
      return verdict(Health::kRefused, kClosedWithoutAnswer);
    }
    answer_.append(buffer.data(), static_cast<size_t>(n));
    if (const auto end = answer_.find('\n'); end != std::string::npos) {
      if (answer_.starts_with("OK ")) {
        return verdict(Health::kAnswered, "");
      }
      return verdict(Health::kRefused, "the VMM answered something other than OK");
    }
    if (answer_.size() > kMaxAnswer) {
      return verdict(Health::kRefused, "the VMM's answer is longer than an OK line");
    }
  }
}

void HealthCheck::on_readable() {
  if (auto answered = read_answer()) {
    finish(std::move(*answered));
  }
}

void HealthCheck::on_deadline() {
  timer_.reset();
  // The loop may have been held (a request served synchronously) past the deadline while
  // the answer waited in the socket: what came counts.
  if (auto answered = read_answer()) {
    finish(std::move(*answered));
    return;
  }
  finish(verdict(Health::kSilent, "no answer within the health check's timeout"));
}

void HealthCheck::finish_soon(HealthVerdict verdict) {
  auto timer =
      loop_.add_timer(std::chrono::nanoseconds(0), [this, v = std::move(verdict)]() mutable {
        timer_.reset();
        finish(std::move(v));
      });
  if (timer) {
    timer_ = *timer;
  }
}

void HealthCheck::finish(HealthVerdict verdict) {
  if (watch_) {
    (void)loop_.remove_watch(*watch_);
    watch_.reset();
  }
  if (timer_) {
    (void)loop_.cancel_timer(*timer_);
    timer_.reset();
  }
  socket_.reset();
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(verdict));  // may destroy this
  }
}

}  // namespace dsec::pool

#include "vmm/pool/host_proxy.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "vmm/http/message.h"
#include "vmm/http/request_head.h"
#include "vmm/io/socket_relay.h"
#include "vmm/pool/host_route.h"

namespace dsec::pool {
namespace {

constexpr std::chrono::milliseconds kErrorSendTimeout{2'000};

// A plain-text HTTP answer that ends the connection.
void refuse(int fd, int stop_fd, int status, const std::string& message) {
  http::HttpResponse response =
      http::HttpResponse::text("dsec-vmm proxy: " + message + "\n", "text/plain; charset=utf-8");
  response.status = status;
  (void)io::send_all(fd, response.serialize(/*close=*/true), kErrorSendTimeout, stop_fd);
}

}  // namespace

Result<std::unique_ptr<HostProxy>> HostProxy::listen(const std::string& address, uint16_t port,
                                                     HostProxyOptions options,
                                                     ProxyResolver resolve) {
  if (options.domain.empty()) {
    return fail("the proxy has no domain", "give --proxy-domain, e.g. sandbox.example.com");
  }
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sin.sin_addr) != 1) {
    return fail(fmt::format("the proxy's address '{}' is no IPv4 address", address),
                "give a numeric IPv4 address, e.g. 0.0.0.0:8080");
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return fail_errno("socket", errno);
  }
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0) {
    return fail_errno(fmt::format("the proxy cannot listen on {}:{}", address, port), errno);
  }
  if (::listen(fd.get(), 128) != 0) {
    return fail_errno("listen", errno);
  }
  socklen_t len = sizeof sin;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len);
  auto stop = DSEC_TRY(io::EventFd::create());
  std::unique_ptr<HostProxy> proxy(new HostProxy(
      std::move(fd), ntohs(sin.sin_port), std::move(stop), std::move(options), std::move(resolve)));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->accept_loop(); });
  return proxy;
}

HostProxy::HostProxy(UniqueFd listener, uint16_t port, io::EventFd stop, HostProxyOptions options,
                     ProxyResolver resolve)
    : listener_(std::move(listener)),
      port_(port),
      stop_(std::move(stop)),
      options_(std::move(options)),
      resolve_(std::move(resolve)) {}

HostProxy::~HostProxy() {
  (void)stop_.signal();
  if (acceptor_.joinable()) {
    acceptor_.join();
  }
  reap(true);
}

size_t HostProxy::connections() const {
  const std::lock_guard lock(mutex_);
  size_t live = 0;
  for (const auto& c : connections_) {
    live += c.done ? 0 : 1;
  }
  return live;
}

void HostProxy::reap(bool all) {
  std::list<Connection> finished;
  {
    const std::lock_guard lock(mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (all || it->done) {
        finished.splice(finished.end(), connections_, it);
      }
      it = next;
    }
  }
  for (auto& c : finished) {
    c.thread.join();
  }
}

void HostProxy::accept_loop() {
  while (true) {
    std::array<pollfd, 2> fds{pollfd{.fd = listener_.get(), .events = POLLIN, .revents = 0},
                              pollfd{.fd = stop_.fd(), .events = POLLIN, .revents = 0}};
    // Wakes now and then to join finished connections' threads.
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) {
      spdlog::error("proxy: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) {
      return;
    }
    reap(false);
    if ((fds[0].revents & POLLIN) == 0) {
      continue;
    }
    UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!client) {
      continue;  // the client went before we took it, or fds ran out for now
    }
    std::unique_lock lock(mutex_);
    if (connections_.size() >= options_.max_connections) {
      lock.unlock();
      refuse(client.get(), stop_.fd(), 503,
             fmt::format("the proxy serves {} connections already; try again later",
                         options_.max_connections));
      continue;
    }
    Connection& c = connections_.emplace_back();
    c.thread = std::thread([this, &c, fd = std::move(client)]() mutable {
      serve(std::move(fd));
      c.done = true;
    });
  }
}

void HostProxy::serve(UniqueFd client) const {
  const int stop = stop_.fd();
  http::RequestHead head;
  std::string received;
  const auto deadline = std::chrono::steady_clock::now() + options_.head_timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::array<pollfd, 2> fds{pollfd{.fd = client.get(), .events = POLLIN, .revents = 0},
                              pollfd{.fd = stop, .events = POLLIN, .revents = 0}};
    const int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready < 0 || fds[1].revents != 0) {
      return;
    }
    if (ready == 0) {
      return refuse(
          client.get(), stop, 408,
          fmt::format("no whole request head within {} ms", options_.head_timeout.count()));
    }
    std::array<char, 4096> buffer{};
    const ssize_t n = ::recv(client.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      return;
    }
    if (n < 0) {
      continue;
    }
    const std::string_view bytes(buffer.data(), static_cast<size_t>(n));
    received.append(bytes);
    auto complete = head.feed(bytes);
    if (!complete) {
      return refuse(client.get(), stop, 400, complete.error().message());
    }
    if (*complete) {
      break;
    }
  }
  const std::string_view host = head.header("host");
  if (host.empty()) {
    return refuse(client.get(), stop, 400,
                  fmt::format("the request has no Host header: give Host: <port>-<sandbox id>.{}",
                              options_.domain));
  }
  auto route = parse_host_route(host, options_.domain);
  if (!route) {
    return refuse(client.get(), stop, 400, route.error().message());
  }
  auto address = resolve_(route->sandbox_id);
  if (!address) {
    return refuse(client.get(), stop, address.error().status, address.error().message);
  }
  auto guest = io::connect_tcp(*address, route->guest_port, options_.connect_timeout, stop);
  if (!guest) {
    return refuse(client.get(), stop, 502,
                  fmt::format("sandbox {}'s port {} took no connection ({}): is a server "
                              "listening there in the guest?",
                              route->sandbox_id, route->guest_port, guest.error().message()));
  }
  if (!io::send_all(guest->get(), received, options_.connect_timeout, stop)) {
    return;
  }
  io::relay(client.get(), guest->get(), stop);
}

}  // namespace dsec::pool

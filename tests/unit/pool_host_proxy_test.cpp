// The pool's Host-routed proxy (vmm/pool/host_proxy.h) over real TCP sockets on loopback:
// an echo server stands for a guest's port, and the resolver for the pool's table.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/eventually.h"
#include "vmm/common/unique_fd.h"
#include "vmm/pool/host_proxy.h"

namespace dsec::pool {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

UniqueFd listen_on_loopback(uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  EXPECT_EQ(::listen(fd.get(), 16), 0);
  socklen_t len = sizeof sin;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len);
  port = ntohs(sin.sin_port);
  return fd;
}

// A guest's port: echoes every byte of every connection back, and ends its side when the
// client ends its own.
class EchoServer {
 public:
  EchoServer() : listener_(listen_on_loopback(port_)) {
    acceptor_ = std::thread([this] {
      while (true) {
        const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        accepted_++;
        connections_.emplace_back([fd] {
          UniqueFd c(fd);
          char buffer[4096];
          for (ssize_t n = 0; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
            if (::send(fd, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
          }
          ::shutdown(fd, SHUT_WR);
        });
      }
    });
  }
  ~EchoServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    acceptor_.join();
    for (auto& c : connections_) c.join();
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  uint16_t port_ = 0;
  UniqueFd listener_;
  std::atomic<int> accepted_{0};
  std::list<std::thread> connections_;
  std::thread acceptor_;
};

UniqueFd connect_to(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  const timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

void send_text(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// Reads until `want` bytes came, the peer ended, or 10 s passed.
std::string read_some(int fd, size_t want) {
  std::string got;
  char buffer[4096];
  while (got.size() < want) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;  // a child of an earlier test ended (SIGCHLD)
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

std::string read_to_end(int fd) {
  return read_some(fd, SIZE_MAX);
}

ProxyResolver resolver() {
  return [](const std::string& id) -> std::expected<std::string, ProxyRefusal> {
    if (id == "sb-live") return "127.0.0.1";
    if (id == "sb-paused") return std::unexpected(ProxyRefusal{409, "sandbox sb-paused is paused"});
    return std::unexpected(ProxyRefusal{404, "no sandbox " + id + " is in use"});
  };
}

std::unique_ptr<HostProxy> start(HostProxyOptions options = {.domain = "sbx.test"}) {
  auto proxy = HostProxy::listen("127.0.0.1", 0, std::move(options), resolver());
  EXPECT_TRUE(proxy.has_value()) << proxy.error().message();
  return proxy ? std::move(*proxy) : nullptr;
}

TEST(HostProxy, PassesTheRequestUnchangedAndThenStreamsBothWays) {
  EchoServer guest;
  auto proxy = start();
  ASSERT_NE(proxy, nullptr);
  const UniqueFd client = connect_to(proxy->port());
  const std::string head = "GET /chat HTTP/1.1\r\nHost: " + std::to_string(guest.port()) +
                           "-sb-live.sbx.test:" + std::to_string(proxy->port()) +
                           "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  send_text(client.get(), head);
  EXPECT_EQ(read_some(client.get(), head.size()), head);
  // After the head, as a WebSocket's frames would: each way, as it comes.
  for (const std::string& frame :
       std::vector<std::string>{"\x81\x05hello", std::string(100'000, 'x'), "last"}) {
    send_text(client.get(), frame);
    EXPECT_EQ(read_some(client.get(), frame.size()), frame);
  }
  // The client's end reaches the guest, whose own end comes back.
  ::shutdown(client.get(), SHUT_WR);
  EXPECT_EQ(read_to_end(client.get()), "");
  EXPECT_TRUE(test::eventually([&] { return proxy->connections() == 0; }, 10s));
}

TEST(HostProxy, AnswersWhatItCannotRouteWithAnHttpErrorThatSaysWhy) {
  EchoServer guest;
  auto proxy = start();
  ASSERT_NE(proxy, nullptr);
  const auto answer = [&](const std::string& request) {
    const UniqueFd client = connect_to(proxy->port());
    send_text(client.get(), request);
    return read_to_end(client.get());
  };
  const std::string port = std::to_string(guest.port());
  EXPECT_THAT(answer("GET / HTTP/1.1\r\nHost: " + port + "-sb-gone.sbx.test\r\n\r\n"),
              AllOf(StartsWith("HTTP/1.1 404 "), HasSubstr("no sandbox sb-gone is in use")));
  EXPECT_THAT(answer("GET / HTTP/1.1\r\nHost: " + port + "-sb-paused.sbx.test\r\n\r\n"),
              StartsWith("HTTP/1.1 409 "));
  EXPECT_THAT(
      answer("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
      AllOf(StartsWith("HTTP/1.1 400 "), HasSubstr("not under this proxy's domain sbx.test")));
  EXPECT_THAT(answer("GET / HTTP/1.1\r\n\r\n"),
              AllOf(StartsWith("HTTP/1.1 400 "), HasSubstr("no Host header")));
  EXPECT_THAT(answer("\x16\x03\x01 not http\r\n\r\n"), StartsWith("HTTP/1.1 400 "));
  // Nobody listens on port 1 of loopback.
  EXPECT_THAT(answer("GET / HTTP/1.1\r\nHost: 1-sb-live.sbx.test\r\n\r\n"),
              AllOf(StartsWith("HTTP/1.1 502 "), HasSubstr("port 1 took no connection")));
  EXPECT_EQ(guest.accepted(), 0);
}

TEST(HostProxy, ClosesAClientThatSendsNoWholeHeadInTime) {
  auto proxy = start({.domain = "sbx.test", .head_timeout = 300ms});
  ASSERT_NE(proxy, nullptr);
  const UniqueFd client = connect_to(proxy->port());
  send_text(client.get(), "GET / HTTP/1.1\r\nHost: 80-sb-live.sbx.test\r\n");
  EXPECT_THAT(read_to_end(client.get()), StartsWith("HTTP/1.1 408 "));
}

TEST(HostProxy, RefusesConnectionsPastItsCapAndEndsOpenOnesWhenItGoes) {
  EchoServer guest;
  auto proxy = start({.domain = "sbx.test", .max_connections = 2});
  ASSERT_NE(proxy, nullptr);
  const std::string head =
      "GET / HTTP/1.1\r\nHost: " + std::to_string(guest.port()) + "-sb-live.sbx.test\r\n\r\n";
  std::vector<UniqueFd> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(connect_to(proxy->port()));
    send_text(open.back().get(), head);
    EXPECT_EQ(read_some(open.back().get(), head.size()), head);
  }
  const UniqueFd third = connect_to(proxy->port());
  EXPECT_THAT(read_to_end(third.get()),
              AllOf(StartsWith("HTTP/1.1 503 "), HasSubstr("2 connections")));
  // Its end closes both relays, though neither side ended them.
  const auto start_time = std::chrono::steady_clock::now();
  proxy.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start_time, 5s);
  for (auto& fd : open) EXPECT_EQ(read_to_end(fd.get()), "");
}

}  // namespace
}  // namespace dsec::pool

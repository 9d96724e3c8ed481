// For tests of clone networks: a TCP listener in a network namespace (the outside world's,
// or the host's), and IPv4 addresses as text.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "vmm/common/unique_fd.h"
#include "vmm/network/egress_policy.h"
#include "vmm/network/namespace_thread.h"

namespace dsec::test {

inline std::string ip(uint32_t address) {
  const std::string cidr = network::to_string({.address = address, .prefix = 32});
  return cidr.substr(0, cidr.find('/'));
}

// A TCP listener on ADDRESS:PORT in the network namespace `netns_fd`, until destroyed. It
// answers each connection with "hello from ADDRESS\n" and ends its side; or, as a sink,
// only reads. Either reads each connection to its end and counts the bytes.
class Listener {
 public:
  enum class Kind { kReply, kSink };
  // `reply`: what each connection is answered with; empty: "hello from ADDRESS\n".
  Listener(int netns_fd, uint32_t address, uint16_t port, Kind kind = Kind::kReply,
           std::string reply = {})
      : reply_(reply.empty() ? "hello from " + ip(address) + "\n" : std::move(reply)) {
    auto made = network::in_namespace(netns_fd, [&]() -> Result<UniqueFd> {
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_in sin{.sin_family = AF_INET,
                      .sin_port = htons(port),
                      .sin_addr = {htonl(address)},
                      .sin_zero = {}};
      if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0 ||
          ::listen(fd.get(), 8) != 0) {
        return fail_errno("listener on " + ip(address), errno);
      }
      return fd;
    });
    EXPECT_TRUE(made.has_value()) << made.error().message();
    if (!made) return;
    fd_ = std::move(*made);
    thread_ = std::thread([this, kind] {
      while (!stop_) {
        pollfd pfd{.fd = fd_.get(), .events = POLLIN, .revents = 0};
        if (::poll(&pfd, 1, 100) != 1) continue;
        UniqueFd client(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!client) continue;
        ++connections_;
        if (kind == Kind::kReply) {
          // Then read what the client sent up to its end: a socket closed with unread data
          // resets the connection, and the client might lose the reply to that.
          (void)!::write(client.get(), reply_.data(), reply_.size());
          ::shutdown(client.get(), SHUT_WR);
        }
        char buffer[256];
        while (!stop_) {
          pollfd in{.fd = client.get(), .events = POLLIN, .revents = 0};
          if (::poll(&in, 1, 100) != 1) continue;
          const ssize_t got = ::read(client.get(), buffer, sizeof(buffer));
          if (got <= 0) break;
          bytes_ += got;
        }
      }
    });
  }
  ~Listener() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int connections() const { return connections_; }
  long bytes() const { return bytes_; }
  const std::string& reply() const { return reply_; }

 private:
  std::string reply_;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<long> bytes_{0};
  std::thread thread_;
};

// A UDP socket bound to ADDRESS:PORT in the network namespace `netns_fd`, which reads only
// what the test asks for: a flood sent to it is dropped once its buffer is full, and no
// port-unreachable goes back. Its reads wait at most 5 s.
inline UniqueFd udp_socket_in(int netns_fd, uint32_t address, uint16_t port) {
  auto made = network::in_namespace(netns_fd, [&]() -> Result<UniqueFd> {
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    const sockaddr_in sin{.sin_family = AF_INET,
                          .sin_port = htons(port),
                          .sin_addr = {htonl(address)},
                          .sin_zero = {}};
    const timeval timeout{.tv_sec = 5, .tv_usec = 0};
    if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0 ||
        ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
      return fail_errno("udp socket on " + ip(address), errno);
    }
    return fd;
  });
  EXPECT_TRUE(made.has_value()) << made.error().message();
  return made ? std::move(*made) : UniqueFd();
}

}  // namespace dsec::test

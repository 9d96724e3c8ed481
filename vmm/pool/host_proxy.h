// The pool's Host-routed proxy (docs/network.md, "The Host-routed proxy"): a TCP listener
// that reads each connection's first request head, takes the sandbox and guest port its
// Host header names (host_route.h), connects to that port of the sandbox's guest, and from
// then on passes every byte both ways unchanged: keep-alive requests, streamed bodies and
// WebSocket upgrades alike. Each connection has a thread of its own, up to a cap; a client
// that sends no complete head in time, names no live sandbox or a port nobody listens on
// gets a plain-text HTTP error that says so, and the connection closes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/event_fd.h"

namespace dsec::pool {

struct HostProxyOptions {
  std::string domain;  // Host: <port>-<sandbox id>.<domain>
  size_t max_connections = 512;
  std::chrono::milliseconds head_timeout{10'000};    // from accept to a whole head
  std::chrono::milliseconds connect_timeout{5'000};  // to the guest's port
};

// Why a sandbox cannot be reached: the HTTP status for the client and the reason.
struct ProxyRefusal {
  int status = 502;
  std::string message;
};
// The IPv4 address ("10.200.0.2") on the host's side that reaches sandbox `id`'s guest.
// Called on a connection's thread.
using ProxyResolver =
    std::function<std::expected<std::string, ProxyRefusal>(const std::string& sandbox_id)>;

class HostProxy {
 public:
  // Listens on `address`:`port` (numeric IPv4; port 0 picks a free one).
  static Result<std::unique_ptr<HostProxy>> listen(const std::string& address, uint16_t port,
                                                   HostProxyOptions options, ProxyResolver resolve);
  HostProxy(const HostProxy&) = delete;
  HostProxy& operator=(const HostProxy&) = delete;
  // Closes the listener and every connection, and waits for their threads.
  ~HostProxy();

  uint16_t port() const { return port_; }
  // Connections being served now.
  size_t connections() const;

 private:
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  HostProxy(UniqueFd listener, uint16_t port, io::EventFd stop, HostProxyOptions options,
            ProxyResolver resolve);
  void accept_loop();
  void reap(bool all);
  void serve(UniqueFd client) const;

  UniqueFd listener_;
  uint16_t port_;
  io::EventFd stop_;  // signalled once, at the end: every poll of every thread watches it
  HostProxyOptions options_;
  ProxyResolver resolve_;
  mutable std::mutex mutex_;
  std::list<Connection> connections_;
  std::thread acceptor_;
};

}  // namespace dsec::pool

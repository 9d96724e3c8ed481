// For tests: the host side of VMMs' vsock sockets without VMMs. Each listen(PATH) binds a
// Unix socket that answers host-initiated connections as dsec-vmm does: it reads the
// "CONNECT PORT\n" line and writes "OK 5000\n" (the guest accepted), or, for a path that
// was made silent, holds the connection without a word (a stuck VMM). With an agent, the
// guest agent's own session code (guest/agent/session.h) then serves the request on the
// host, as it would in the guest. One thread serves every socket, one connection at a
// time; it stops, and the sockets close, when the object goes.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "guest/agent/session.h"
#include "vmm/common/unique_fd.h"

namespace dsec::test {

class FakeVsockEndpoint {
 public:
  enum class After { kClose, kServeAgent };
  explicit FakeVsockEndpoint(After after = After::kClose)
      : after_(after), thread_([this] { serve(); }) {}
  FakeVsockEndpoint(const FakeVsockEndpoint&) = delete;
  FakeVsockEndpoint& operator=(const FakeVsockEndpoint&) = delete;
  ~FakeVsockEndpoint() {
    stop_ = true;
    thread_.join();
  }

  // Binds `path` and answers there from now on; false when it cannot.
  bool listen(const std::string& path) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (!fd || path.size() >= sizeof addr.sun_path) {
      return false;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd.get(), 16) != 0) {
      return false;
    }
    const std::lock_guard lock(mutex_);
    listeners_[path] = std::move(fd);
    return true;
  }
  // From now on, connections to `path` get no answer.
  void silence(const std::string& path) {
    const std::lock_guard lock(mutex_);
    silent_.push_back(path);
  }
  // Closes the connections held silent: their clients see the end.
  void close_held() {
    const std::lock_guard lock(mutex_);
    held_.clear();
  }
  // The CONNECT lines received so far.
  std::vector<std::string> lines() const {
    const std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds;
      std::vector<std::string> paths;
      {
        const std::lock_guard lock(mutex_);
        for (const auto& [path, fd] : listeners_) {
          fds.push_back(pollfd{.fd = fd.get(), .events = POLLIN, .revents = 0});
          paths.push_back(path);
        }
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) {
        continue;
      }
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents != 0) {
          answer(fds[i].fd, paths[i]);
        }
      }
    }
  }

  void answer(int listener, const std::string& path) {
    UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
      return;
    }
    pollfd readable{.fd = conn.get(), .events = POLLIN, .revents = 0};
    std::string line(64, '\0');
    const ssize_t n =
        ::poll(&readable, 1, 1000) == 1 ? ::read(conn.get(), line.data(), line.size()) : -1;
    {
      const std::lock_guard lock(mutex_);
      line.resize(n > 0 ? static_cast<size_t>(n) : 0);
      lines_.push_back(line);
      if (std::find(silent_.begin(), silent_.end(), path) != silent_.end()) {
        held_.push_back(std::move(conn));
        return;
      }
    }
    (void)::write(conn.get(), "OK 5000\n", 8);
    if (after_ == After::kServeAgent) {
      (void)agent::serve_connection(conn.get());
    }
  }

  mutable std::mutex mutex_;
  std::map<std::string, UniqueFd> listeners_;
  std::vector<std::string> silent_;
  std::vector<std::string> lines_;
  std::vector<UniqueFd> held_;  // silent connections, open until the end
  std::atomic<bool> stop_{false};
  const After after_;
  std::thread thread_;
};

}  // namespace dsec::test

// The host end of hybrid vsock's handshake (unix_socket.h): accepts host processes on the
// device's Unix socket and reads each one's "CONNECT <port>\n" line, leaving whatever
// follows the line in the socket as the stream's first data. A socket that closes (or
// shuts its writing side), fails, sends anything but a well-formed line, or has not sent a
// whole line within the handshake timeout is closed: the host sees EOF before any "OK".
//
// Threading: as the muxer's (muxer.h). Every member runs on the event loop's thread with
// the device's lock held, but close_pending() may run anywhere with the lock held; the
// handlers it registers run inside `guard`, which takes that lock. Destroy it on the loop's
// thread or while the loop is not running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/event_loop.h"

namespace dsec::virtio::vsock {

class HostListener {
 public:
  // Host sockets accepted that have not sent their CONNECT line yet; more are closed.
  static constexpr size_t kMaxPending = 64;
  // How long a host socket has from its connect to the end of its CONNECT line.
  static constexpr std::chrono::milliseconds kHandshakeTimeout{10000};

  // Runs a handler's work (the muxer's takes the device's lock, then delivers packets).
  using Guard = std::function<void(const std::function<void()>&)>;
  // A host socket asked for guest port `port`; dropping `socket` refuses it.
  using Connected = std::function<void(UniqueFd socket, uint32_t port)>;

  // Listens on `path` (created here; it must not exist). Closed until set_open(true).
  static Result<std::unique_ptr<HostListener>> create(
      io::EventLoop& loop, std::string path, Guard guard, Connected connected,
      std::chrono::milliseconds handshake_timeout = kHandshakeTimeout);
  // Stops listening and removes the socket file: a later VM (or a restore) binds the path.
  ~HostListener();
  HostListener(const HostListener&) = delete;
  HostListener& operator=(const HostListener&) = delete;

  // While closed, host sockets are accepted and closed at once.
  void set_open(bool open) { open_ = open; }
  // While `only` (a restored clone before its agent took fresh entropy and the host's
  // clock), a host socket of another process is accepted and held, unread, and this
  // process's own (the clone sync's) goes through; turning it off lets the held ones
  // through, each with its handshake timeout from then. The peer is SO_PEERCRED's pid.
  void admit_only_own(bool only);
  // Ends every handshake in progress. Its sockets are closed by purge(), on the loop thread.
  void close_pending();
  void purge();

  size_t pending_count() const { return pending_.size(); }
  const std::string& path() const { return path_; }

 private:
  struct Pending {
    UniqueFd fd;
    std::optional<io::WatchId> watch;
    std::optional<io::TimerId> deadline;
  };

  HostListener(io::EventLoop& loop, std::string path, Guard guard, Connected connected,
               std::chrono::milliseconds handshake_timeout);
  void on_listener_ready();
  // Starts the handshake of an accepted socket: its CONNECT line is read as it comes.
  void admit(UniqueFd fd);
  bool from_own_process(int fd) const;
  void on_pending_ready(uint64_t id);
  // Ends the handshake of `id`: its watch and deadline go, and its socket is returned (to
  // hand on, or to close by dropping it).
  UniqueFd take(uint64_t id);
  void forget(Pending& pending);

  io::EventLoop& loop_;
  std::string path_;
  Guard guard_;
  Connected connected_;
  std::chrono::milliseconds handshake_timeout_;
  bool open_ = false;
  bool own_only_ = false;
  pid_t own_pid_;
  std::vector<UniqueFd> held_;  // other processes' sockets while own_only_
  UniqueFd listener_;
  std::optional<io::WatchId> listener_watch_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Pending> pending_;
  std::vector<Pending> closed_;  // close_pending()'s, whose watches purge() removes
  LogRateLimiter log_limiter_;
};

}  // namespace dsec::virtio::vsock

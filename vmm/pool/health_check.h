// Whether a sandbox still serves, asked without blocking the daemon's event loop: a
// non-blocking connection to the sandbox's vsock socket asks for the agent's port
// (Firecracker's "CONNECT PORT\n") and waits for the VMM's "OK ..." line. The VMM writes
// that line only once the guest's kernel has accepted the stream, so it proves the VMM's
// event loop and the guest's kernel alive and the agent listening, without running
// anything in the guest beyond the agent's accept. A VMM whose loop is stuck, or whose
// guest's kernel no longer answers, stays silent; a guest whose agent is gone refuses the
// port, and the VMM closes the connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "vmm/common/unique_fd.h"
#include "vmm/io/event_loop.h"

namespace dsec::pool {

enum class Health {
  kAnswered,   // the "OK" line came
  kSilent,     // nothing came within the timeout, or the socket did not accept
  kRefused,    // the connection was refused or closed, or the VMM wrote something else
  kUnchecked,  // the daemon could not ask (no descriptor, no watch): no verdict
};

struct HealthVerdict {
  Health health = Health::kUnchecked;
  std::string why;  // for the log, when not answered
};

class HealthCheck {
 public:
  using Done = std::move_only_function<void(HealthVerdict)>;

  // Connects to `vsock_path` and asks for `port`; `done` runs once on the loop's thread,
  // with the verdict, unless the check is destroyed first. Never calls `done` from inside
  // start().
  static std::unique_ptr<HealthCheck> start(io::EventLoop& loop, const std::string& vsock_path,
                                            uint32_t port, std::chrono::milliseconds timeout,
                                            Done done);
  HealthCheck(const HealthCheck&) = delete;
  HealthCheck& operator=(const HealthCheck&) = delete;
  // Closes the connection; `done` is not called after this.
  ~HealthCheck();

 private:
  HealthCheck(io::EventLoop& loop, Done done) : loop_(loop), done_(std::move(done)) {}
  // Connects and writes the CONNECT line; a verdict when that already failed.
  std::optional<HealthVerdict> ask(const std::string& vsock_path, uint32_t port);
  void on_readable();
  void on_deadline();
  // Reads what the socket has; a verdict once the line or the end came.
  std::optional<HealthVerdict> read_answer();
  // Delivers `verdict` on the loop's next turn (from start()).
  void finish_soon(HealthVerdict verdict);
  // Calls `done`; the caller must not touch `this` after (done may destroy it).
  void finish(HealthVerdict verdict);

  io::EventLoop& loop_;
  Done done_;
  UniqueFd socket_;
  std::string answer_;
  std::optional<io::WatchId> watch_;
  std::optional<io::TimerId> timer_;
};

}  // namespace dsec::pool

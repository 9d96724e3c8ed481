// The agent's one loop (server.h): a poll() over the listener, every open connection, the
// kept processes' pipes, and a signalfd for SIGCHLD. Requests about kept processes are
// answered here; the rest are handed, first frame and all, to a child (session.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "guest/agent/connection.h"
#include "guest/agent/process_table.h"
#include "guest/agent/server.h"

namespace dsec::agent {

// How many connections the loop holds at once; past it, new ones wait in the listener's
// backlog. Each holds at most one frame of output in flight.
inline constexpr size_t kMaxLoopConnections = 128;
// How long a connection has to send its first frame, and to take its answer.
inline constexpr std::chrono::seconds kFirstFrameTimeout{10};
inline constexpr std::chrono::seconds kAnswerTimeout{30};

class AgentLoop {
 public:
  using Clock = std::chrono::steady_clock;

  AgentLoop(int listener, ServeOptions options);
  // Returns why it stopped.
  std::string run();

 private:
  void reap_children();
  void accept_connection();
  void on_connection_ready(Connection& c, short revents);
  void dispatch(Connection& c, const Frame& first);
  void attach(Connection& c, const Frame& first);
  void hand_to_session(Connection& c, const Frame& first);
  // Moves an attached connection's stream on: the next frame of output, or the exit.
  void pump(Connection& c);
  // Whether an attached connection has output or an exit to send.
  bool has_more(Connection& c);
  void close(Connection& c);
  std::optional<Clock::time_point> next_deadline(std::optional<Clock::time_point> table_timer);

  int listener_;
  ServeOptions options_;
  UniqueFd sigchld_;
  ProcessTable table_;
  std::list<Connection> connections_;
};

}  // namespace dsec::agent

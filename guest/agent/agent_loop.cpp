#include "guest/agent/agent_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>

#include "guest/agent/session.h"
#include "vmm/agent/process_protocol.h"

namespace dsec::agent {
namespace {

// A session child keeps only its connection: the loop's other connections and the kept
// processes' pipes are not its to hold open (a stdin it held would never see its end).
void close_all_but(int keep) {
  if (keep > 3 && ::close_range(3, static_cast<unsigned>(keep - 1), 0) != 0) {
    for (int fd = 3; fd < keep; ++fd) {
      ::close(fd);
    }
  }
  if (::close_range(static_cast<unsigned>(keep + 1), ~0U, 0) != 0) {
    for (int fd = keep + 1; fd < 4096; ++fd) {
      ::close(fd);
    }
  }
}

void unblock_all_signals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

int ms_until(AgentLoop::Clock::time_point when) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(when - AgentLoop::Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX));
}

template <typename Message>
std::vector<uint8_t> encoded(const Message& m) {
  return encode(m);
}

}  // namespace

AgentLoop::AgentLoop(int listener, ServeOptions options)
    : listener_(listener), options_(std::move(options)) {
  // SIGCHLD arrives through a signalfd the loop polls, so no exit is missed between a
  // waitpid and the poll. Children unblock it again before they exec.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  sigchld_.reset(::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC));
  (void)::signal(SIGPIPE, SIG_IGN);
  // A connection that goes away between poll() and accept() must not block the loop.
  ::fcntl(listener_, F_SETFL, ::fcntl(listener_, F_GETFL) | O_NONBLOCK);
}

std::string AgentLoop::run() {
  if (!sigchld_) {
    return std::string("signalfd: ") + std::strerror(errno);
  }
  std::vector<pollfd> fds;
  while (true) {
    reap_children();
    const auto table_timer = table_.tick();
    for (auto& c : connections_) {
      // Frame after frame while the socket takes them: the loop may sleep only when the
      // stream waits for output or for the host.
      do {
        if (c.state == Connection::State::kAttached) {
          pump(c);
        }
        if (!c.closed && c.sending()) {
          if (auto sent = c.flush(); !sent) {
            close(c);
          }
        }
      } while (!c.closed && c.state == Connection::State::kAttached && !c.sending() && has_more(c));
      if (!c.closed && c.state == Connection::State::kAnswering && !c.sending()) {
        close(c);
      }
    }
    connections_.remove_if([](const Connection& c) { return c.closed; });

    fds.clear();
    fds.push_back({sigchld_.get(), POLLIN, 0});
    if (options_.stop_fd >= 0) {
      fds.push_back({options_.stop_fd, POLLIN, 0});
    }
    if (connections_.size() < kMaxLoopConnections) {
      fds.push_back({listener_, POLLIN, 0});
    }
    for (const auto& c : connections_) {
      // An attached host sends nothing more: a readable socket is its end.
      fds.push_back({c.fd(), static_cast<short>(c.sending() ? POLLOUT : POLLIN), 0});
    }
    table_.add_pollfds(fds);
    const auto deadline = next_deadline(table_timer);
    const int n = ::poll(fds.data(), fds.size(), deadline ? ms_until(*deadline) : -1);
    if (n < 0 && errno != EINTR) {
      return std::string("poll: ") + std::strerror(errno);
    }
    const auto now = Clock::now();
    for (auto& c : connections_) {
      if (c.state != Connection::State::kAttached && now >= c.deadline()) {
        close(c);  // a host that sends no request, or takes no answer, in time
      }
    }
    bool accept_ready = false;
    for (const pollfd& p : fds) {
      if (p.revents == 0) {
        continue;
      }
      if (p.fd == sigchld_.get()) {
        signalfd_siginfo info{};
        while (::read(sigchld_.get(), &info, sizeof info) > 0) {
        }
      } else if (p.fd == options_.stop_fd) {
        return "stopped";
      } else if (p.fd == listener_) {
        accept_ready = true;
      } else if (auto c = std::find_if(connections_.begin(), connections_.end(),
                                       [&](const Connection& x) { return x.fd() == p.fd; });
                 c != connections_.end()) {
        if (!c->closed) {
          on_connection_ready(*c, p.revents);
        }
      } else {
        table_.on_ready(p);
      }
    }
    // After the rest: a new connection may reuse the number of an fd closed above, and
    // must not take that fd's readiness for its own.
    if (accept_ready) {
      accept_connection();
    }
  }
}

void AgentLoop::reap_children() {
  int wstatus = 0;
  pid_t pid = 0;
  // Kept processes, session children, and orphans re-parented to init: all reaped here.
  while ((pid = ::waitpid(-1, &wstatus, WNOHANG)) > 0) {
    (void)table_.on_exit(pid, wstatus);
  }
}

void AgentLoop::accept_connection() {
  UniqueFd conn(::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) {
    return;  // EAGAIN, ECONNABORTED, out of fds: keep serving the rest
  }
  connections_.emplace_back(std::move(conn), Clock::now() + kFirstFrameTimeout);
}

void AgentLoop::on_connection_ready(Connection& c, short revents) {
  if (c.sending() && (revents & POLLOUT)) {
    if (auto sent = c.flush(); !sent) {
      close(c);
    }
    return;
  }
  if (c.state != Connection::State::kRequest) {
    close(c);  // the host closed it, or sent what it should not
    return;
  }
  auto more = c.reader().fill();
  if (!more || !*more) {
    close(c);  // connected and left (a readiness probe), or a broken connection
    return;
  }
  auto frame = c.reader().buffered();
  if (!frame) {
    close(c);  // not our protocol: out of step, nothing to answer
    return;
  }
  if (const std::optional<Frame>& whole = *frame; whole.has_value()) {
    dispatch(c, *whole);
  }
}

void AgentLoop::dispatch(Connection& c, const Frame& f) {
  const auto answer_by = Clock::now() + kAnswerTimeout;
  const auto answer = [&](MessageType type, const std::vector<uint8_t>& payload) {
    c.answer(type, f.request_id, payload, answer_by);
  };
  const auto done = [&](const Status& s) {
    if (s) {
      answer(MessageType::kOk, {});
    } else {
      answer(MessageType::kError, encoded(ErrorReply{s.error().message()}));
    }
  };
  const auto refuse = [&](const Error& e) { done(std::unexpected(e)); };
  switch (f.type) {
    case MessageType::kHealth:
      answer(MessageType::kHealthOk, encoded(HealthReply{options_.agent_version, uptime_ms()}));
      return;
    case MessageType::kProcessStart: {
      auto req = decode_process_start_request(f.payload);
      auto pid = req ? table_.start(*req) : std::unexpected(req.error());
      if (!pid) {
        return refuse(pid.error());
      }
      return answer(MessageType::kProcessStarted, encoded(ProcessRef{static_cast<uint32_t>(*pid)}));
    }
    case MessageType::kProcessAttach:
      return attach(c, f);
    case MessageType::kProcessList:
      return answer(MessageType::kProcessListReply, encoded(table_.list()));
    case MessageType::kProcessInput: {
      auto m = decode_process_input(f.payload);
      return done(m ? table_.input(*m) : std::unexpected(m.error()));
    }
    case MessageType::kProcessCloseStdin: {
      auto m = decode_process_ref(f.payload);
      return done(m ? table_.close_stdin(static_cast<pid_t>(m->pid)) : std::unexpected(m.error()));
    }
    case MessageType::kProcessSignal: {
      auto m = decode_process_signal(f.payload);
      return done(m ? table_.signal(*m) : std::unexpected(m.error()));
    }
    case MessageType::kProcessResize: {
      auto m = decode_process_resize(f.payload);
      return done(m ? table_.resize(*m) : std::unexpected(m.error()));
    }
    default:
      return hand_to_session(c, f);
  }
}

void AgentLoop::attach(Connection& c, const Frame& f) {
  auto m = decode_process_ref(f.payload);
  KeptProcess* p = m ? table_.find(static_cast<pid_t>(m->pid)) : nullptr;
  if (p == nullptr) {
    const std::string why = m ? "no process " + std::to_string(m->pid) +
                                    " is kept by the agent (it never was, or it ended and "
                                    "was reported)"
                              : m.error().message();
    c.answer(MessageType::kError, f.request_id, encoded(ErrorReply{why}),
             Clock::now() + kAnswerTimeout);
    return;
  }
  c.state = Connection::State::kAttached;
  c.request_id = f.request_id;
  c.pid = p->pid;
  c.stdout_at = p->stdout_buffer.unread();
  c.stderr_at = p->stderr_buffer.unread();
  ++p->attached;
}

void AgentLoop::hand_to_session(Connection& c, const Frame& first) {
  const pid_t child = ::fork();
  if (child == 0) {
    unblock_all_signals();
    (void)::signal(SIGPIPE, SIG_IGN);
    close_all_but(c.fd());
    const int rc = serve_request(c.fd(), c.reader(), first, {options_.agent_version});
    ::_exit(rc);
  }
  // Out of processes (child < 0): the connection closes unanswered; the host retries.
  close(c);
}

void AgentLoop::pump(Connection& c) {
  if (c.closed || c.sending()) {
    return;
  }
  KeptProcess* p = table_.find(c.pid);
  if (p == nullptr) {
    close(c);
    return;
  }
  if (auto out = p->stdout_buffer.read(c.stdout_at, kMaxChunk); !out.empty()) {
    c.queue(MessageType::kStdout, c.request_id, out);
  } else if (auto err = p->stderr_buffer.read(c.stderr_at, kMaxChunk); !err.empty()) {
    c.queue(MessageType::kStderr, c.request_id, err);
  } else if (p->exit.has_value() && p->finished()) {
    c.answer(MessageType::kExit, c.request_id, encoded(*p->exit), Clock::now() + kAnswerTimeout);
    p->end_reported = true;
    --p->attached;
    c.pid = -1;
  }
  // What every reader attached to it has sent is read: the buffer lets it go.
  uint64_t out_floor = std::numeric_limits<uint64_t>::max();
  uint64_t err_floor = out_floor;
  for (const auto& other : connections_) {
    if (other.state == Connection::State::kAttached && other.pid == p->pid && !other.closed) {
      out_floor = std::min(out_floor, other.stdout_at);
      err_floor = std::min(err_floor, other.stderr_at);
    }
  }
  p->stdout_buffer.release_before(out_floor);
  p->stderr_buffer.release_before(err_floor);
}

bool AgentLoop::has_more(Connection& c) {
  KeptProcess* p = table_.find(c.pid);
  return p != nullptr && (c.stdout_at < p->stdout_buffer.end() ||
                          c.stderr_at < p->stderr_buffer.end() || p->finished());
}

void AgentLoop::close(Connection& c) {
  if (c.state == Connection::State::kAttached && c.pid >= 0) {
    if (KeptProcess* p = table_.find(c.pid)) {
      --p->attached;
    }
    c.pid = -1;
  }
  c.closed = true;
  c.take_fd();
}

std::optional<AgentLoop::Clock::time_point> AgentLoop::next_deadline(
    std::optional<Clock::time_point> table_timer) {
  std::optional<Clock::time_point> next = table_timer;
  for (const auto& c : connections_) {
    if (c.state != Connection::State::kAttached) {
      next = std::min(next.value_or(c.deadline()), c.deadline());
    }
  }
  return next;
}

}  // namespace dsec::agent

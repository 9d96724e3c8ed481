#include "guest/agent/process_table.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "guest/agent/process_spawn.h"

namespace dsec::agent {
namespace {

// Output still open after the process exited belongs to something it left running in the
// background: the table reads it this long, then stops (as an exec does).
constexpr auto kDrainAfterExit = std::chrono::milliseconds(200);

ExitStatus exit_status_of(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    return {ExitStatus::Kind::kSignaled, WTERMSIG(wstatus)};
  }
  return {ExitStatus::Kind::kExited, WEXITSTATUS(wstatus)};
}

std::string no_such_process(pid_t pid) {
  return "no process " + std::to_string(pid) +
         " is kept by the agent (it never was, or it ended and was reported)";
}

}  // namespace

ProcessTable::~ProcessTable() {
  for (const auto& entry : processes_) {
    if (!entry.second.exit.has_value()) {
      ::kill(-entry.first, SIGKILL);
      ::waitpid(entry.first, nullptr, 0);
    }
  }
}

Result<pid_t> ProcessTable::start(const ProcessStartRequest& req) {
  reap_finished_for_room();
  if (processes_.size() >= kMaxProcesses) {
    return fail("the agent already keeps " + std::to_string(kMaxProcesses) +
                    " running processes, the most it keeps",
                "wait for some to end, or signal them, then start again");
  }
  SpawnedProcess spawned = DSEC_TRY(spawn_process(req));
  // A finished process whose pid the kernel gave again is gone for good.
  processes_.erase(spawned.pid);
  KeptProcess& p = processes_[spawned.pid];
  p.pid = spawned.pid;
  p.tag = req.tag;
  p.argv = listed_argv(req.argv);
  p.pty = req.pty;
  p.in = std::move(spawned.in);
  p.out = std::move(spawned.out);
  p.err = std::move(spawned.err);
  p.started = starts_++;
  return p.pid;
}

KeptProcess* ProcessTable::find(pid_t pid) {
  const auto it = processes_.find(pid);
  return it == processes_.end() ? nullptr : &it->second;
}

Result<KeptProcess*> ProcessTable::running(pid_t pid) {
  KeptProcess* p = find(pid);
  if (p == nullptr) {
    return fail(no_such_process(pid));
  }
  if (p->exit) {
    return fail("process " + std::to_string(pid) + " has ended");
  }
  return p;
}

ProcessListReply ProcessTable::list() {
  std::vector<KeptProcess*> order;
  order.reserve(processes_.size());
  for (auto& [pid, p] : processes_) {
    order.push_back(&p);
  }
  std::sort(order.begin(), order.end(),
            [](const KeptProcess* a, const KeptProcess* b) { return a->started < b->started; });
  ProcessListReply reply;
  reply.processes.reserve(order.size());
  for (KeptProcess* p : order) {
    ProcessEntry e{static_cast<uint32_t>(p->pid),
                   p->tag,
                   p->argv,
                   !p->exit.has_value(),
                   p->exit.value_or(ExitStatus{}),
                   p->pty,
                   p->stdout_buffer.dropped(),
                   p->stderr_buffer.dropped()};
    reply.processes.push_back(std::move(e));
    if (p->finished() && p->stdout_buffer.unread() == p->stdout_buffer.end() &&
        p->stderr_buffer.unread() == p->stderr_buffer.end()) {
      p->end_reported = true;
    }
  }
  return reply;
}

Status ProcessTable::input(const ProcessInput& m) {
  KeptProcess* p = DSEC_TRY(running(static_cast<pid_t>(m.pid)));
  if (!p->in || p->stdin_closing) {
    return fail("process " + std::to_string(m.pid) + " has no stdin open to write",
                "start it with stdin open, and write before closing its stdin");
  }
  if (p->stdin_pending.size() + m.data.size() > kMaxPendingStdin) {
    return fail("process " + std::to_string(m.pid) + " does not read its stdin: " +
                    std::to_string(p->stdin_pending.size()) + " bytes wait for it already",
                "send more once it has read them");
  }
  p->stdin_pending.insert(p->stdin_pending.end(), m.data.begin(), m.data.end());
  write_stdin(*p);
  return ok();
}

Status ProcessTable::close_stdin(pid_t pid) {
  KeptProcess* p = DSEC_TRY(running(pid));
  if (p->pty) {
    return fail("process " + std::to_string(pid) + " reads a terminal, which has no end of input",
                "send its end-of-file character (Ctrl-D, byte 0x04) as input instead");
  }
  p->stdin_closing = true;
  write_stdin(*p);
  return ok();
}

Status ProcessTable::signal(const ProcessSignal& m) {
  KeptProcess* p = DSEC_TRY(running(static_cast<pid_t>(m.pid)));
  if (::kill(-p->pid, m.signal) != 0) {
    return fail_errno("signal " + std::to_string(m.signal) + " to process " + std::to_string(m.pid),
                      errno);
  }
  return ok();
}

Status ProcessTable::resize(const ProcessResize& m) {
  KeptProcess* p = DSEC_TRY(running(static_cast<pid_t>(m.pid)));
  if (!p->pty) {
    return fail("process " + std::to_string(m.pid) + " has no terminal to resize",
                "start it with a terminal (pty) to give it a size");
  }
  return set_terminal_size(p->in.get(), m.rows, m.cols);
}

bool ProcessTable::on_exit(pid_t pid, int wstatus) {
  KeptProcess* p = find(pid);
  if (p == nullptr || p->exit) {
    return false;  // not ours, or a session child given the pid of one that finished
  }
  p->exit = exit_status_of(wstatus);
  p->exited_at = Clock::now();
  p->stdin_pending.clear();
  if (!p->pty) {
    p->in.reset();
  }
  return true;
}

void ProcessTable::add_pollfds(std::vector<pollfd>& fds) const {
  for (const auto& [pid, p] : processes_) {
    if (p.out) {
      fds.push_back({p.out.get(), POLLIN, 0});
    }
    if (p.err) {
      fds.push_back({p.err.get(), POLLIN, 0});
    }
    if (p.in && !p.stdin_pending.empty()) {
      fds.push_back({p.in.get(), POLLOUT, 0});
    }
  }
}

void ProcessTable::on_ready(const pollfd& ready) {
  for (auto& [pid, p] : processes_) {
    if (p.out && ready.fd == p.out.get() && (ready.events & POLLIN)) {
      read_output(p, false);
    } else if (p.err && ready.fd == p.err.get() && (ready.events & POLLIN)) {
      read_output(p, true);
    } else if (p.in && ready.fd == p.in.get() && (ready.events & POLLOUT)) {
      write_stdin(p);
    } else {
      continue;
    }
    return;
  }
}

void ProcessTable::read_output(KeptProcess& p, bool from_stderr) {
  UniqueFd& fd = from_stderr ? p.err : p.out;
  std::array<uint8_t, kMaxChunk> buf{};
  const ssize_t got = ::read(fd.get(), buf.data(), buf.size());
  if (got > 0) {
    (from_stderr ? p.stderr_buffer : p.stdout_buffer)
        .append(std::span(buf.data(), static_cast<size_t>(got)));
  } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
    fd.reset();  // the end, or EIO from a terminal whose last user closed it
  }
}

void ProcessTable::write_stdin(KeptProcess& p) {
  while (p.in && !p.stdin_pending.empty()) {
    const size_t n = std::min<size_t>(p.stdin_pending.size(), kMaxChunk);
    const std::vector<uint8_t> chunk(p.stdin_pending.begin(),
                                     p.stdin_pending.begin() + static_cast<std::ptrdiff_t>(n));
    const ssize_t put = ::write(p.in.get(), chunk.data(), chunk.size());
    if (put > 0) {
      p.stdin_pending.erase(p.stdin_pending.begin(), p.stdin_pending.begin() + put);
    } else if (put < 0 && (errno == EAGAIN || errno == EINTR)) {
      return;
    } else {
      p.stdin_pending.clear();  // the process closed its stdin
      p.in.reset();
    }
  }
  if (p.in && p.stdin_closing && p.stdin_pending.empty() && !p.pty) {
    p.in.reset();
  }
}

std::optional<ProcessTable::Clock::time_point> ProcessTable::tick() {
  std::optional<Clock::time_point> next;
  const auto now = Clock::now();
  for (auto it = processes_.begin(); it != processes_.end();) {
    KeptProcess& p = it->second;
    if (p.exit && (p.out || p.err)) {
      const auto drain_end = p.exited_at + kDrainAfterExit;
      if (now >= drain_end) {
        p.out.reset();
        p.err.reset();
      } else {
        next = std::min(next.value_or(drain_end), drain_end);
      }
    }
    if (p.finished() && p.pty) {
      p.in.reset();
    }
    if (p.finished() && p.end_reported && p.attached == 0) {
      it = processes_.erase(it);
    } else {
      ++it;
    }
  }
  return next;
}

void ProcessTable::reap_finished_for_room() {
  while (processes_.size() >= kMaxProcesses) {
    auto oldest = processes_.end();
    for (auto it = processes_.begin(); it != processes_.end(); ++it) {
      if (it->second.finished() && it->second.attached == 0 &&
          (oldest == processes_.end() || it->second.started < oldest->second.started)) {
        oldest = it;
      }
    }
    if (oldest == processes_.end()) {
      return;
    }
    processes_.erase(oldest);
  }
}

}  // namespace dsec::agent

#include "guest/agent/process_spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "guest/agent/passwd.h"

namespace dsec::agent {
namespace {

// What the child needs, prepared before the fork so that the child only makes system calls.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<std::string> env;  // added to the agent's environment, in order
  std::string cwd;
  std::optional<UserAccount> user;
  std::string pty_slave;  // the terminal's path, when there is one
  int in = -1, out = -1, err = -1;
};

[[noreturn]] void fail_child(int status_fd, const char* step) {
  const int e = errno;
  (void)!::write(status_fd, &e, sizeof e);
  (void)!::write(status_fd, step, std::strlen(step));
  ::_exit(127);
}

[[noreturn]] void run_child(ChildPlan& plan, int status_fd) {
  ::setsid();     // its own session and process group: a signal reaches all it started
  sigset_t none;  // the agent's loop blocks SIGCHLD for its signalfd; the process gets none
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  (void)::signal(SIGPIPE, SIG_DFL);
  (void)::signal(SIGCHLD, SIG_DFL);
  if (!plan.pty_slave.empty()) {
    const int tty = ::open(plan.pty_slave.c_str(), O_RDWR);
    if (tty < 0 || ::ioctl(tty, TIOCSCTTY, 0) != 0) {
      fail_child(status_fd, "opening its terminal");
    }
    plan.in = plan.out = plan.err = tty;
  }
  if (::dup2(plan.in, 0) < 0 || ::dup2(plan.out, 1) < 0 || ::dup2(plan.err, 2) < 0) {
    fail_child(status_fd, "dup2");
  }
  if (plan.user) {
    const gid_t gid = plan.user->gid;
    if (::setgroups(1, &gid) != 0 || ::setgid(gid) != 0 || ::setuid(plan.user->uid) != 0) {
      fail_child(status_fd, "switching to its user");
    }
  }
  if (::chdir(plan.cwd.c_str()) != 0) {
    fail_child(status_fd, "changing to its working directory");
  }
  for (auto& e : plan.env) {
    ::putenv(e.data());
  }
  ::execvp(plan.argv[0], plan.argv.data());
  fail_child(status_fd, "exec");
}

Status open_terminal(const ProcessStartRequest& req, SpawnedProcess& p, ChildPlan& plan) {
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) {
    return fail_errno("opening a terminal (posix_openpt)", errno, "is /dev/pts mounted?");
  }
  const char* slave = ::ptsname(master.get());
  if (slave == nullptr) {
    return fail_errno("ptsname", errno);
  }
  plan.pty_slave = slave;
  DSEC_TRY(set_terminal_size(master.get(), req.rows, req.cols));
  p.out.reset(::fcntl(master.get(), F_DUPFD_CLOEXEC, 0));
  if (!p.out) {
    return fail_errno("dup of the terminal", errno);
  }
  p.in = std::move(master);
  return ok();
}

}  // namespace

Status make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    return fail_errno("pipe2", errno);
  }
  read_end.reset(p[0]);
  write_end.reset(p[1]);
  return ok();
}

Status set_terminal_size(int master, uint16_t rows, uint16_t cols) {
  winsize ws{};
  ws.ws_row = rows;
  ws.ws_col = cols;
  if (::ioctl(master, TIOCSWINSZ, &ws) != 0) {
    return fail_errno("setting the terminal's size (TIOCSWINSZ)", errno);
  }
  return ok();
}

Result<SpawnedProcess> spawn_process(const ProcessStartRequest& req) {
  ChildPlan plan;
  if (!req.user.empty()) {
    plan.user = DSEC_TRY(lookup_user(req.user));
    plan.env = {"HOME=" + plan.user->home, "USER=" + plan.user->name, "LOGNAME=" + plan.user->name};
  }
  plan.cwd = !req.cwd.empty() ? req.cwd : plan.user ? plan.user->home : "/";
  if (req.pty) {
    plan.env.emplace_back("TERM=xterm-256color");
  }
  plan.env.insert(plan.env.end(), req.env.begin(), req.env.end());
  for (const auto& a : req.argv) {
    plan.argv.push_back(const_cast<char*>(a.c_str()));
  }
  plan.argv.push_back(nullptr);

  SpawnedProcess p;
  UniqueFd child_in, child_out, child_err, status_r, status_w;
  if (req.pty) {
    DSEC_TRY(open_terminal(req, p, plan));
  } else {
    if (req.stdin_open) {
      DSEC_TRY(make_pipe(child_in, p.in));
    } else {
      child_in.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!child_in) {
        return fail_errno("open /dev/null", errno);
      }
    }
    DSEC_TRY(make_pipe(p.out, child_out));
    DSEC_TRY(make_pipe(p.err, child_err));
    plan.in = child_in.get();
    plan.out = child_out.get();
    plan.err = child_err.get();
  }
  DSEC_TRY(make_pipe(status_r, status_w));
  p.pid = ::fork();
  if (p.pid < 0) {
    return fail_errno("cannot start '" + req.argv[0] + "': fork", errno);
  }
  if (p.pid == 0) {
    run_child(plan, status_w.get());
  }
  status_w.reset();
  // The child's exec closes the status pipe (close-on-exec) with nothing written; a failure
  // writes its errno and the step that failed.
  char report[128] = {};
  ssize_t got = 0;
  while ((got = ::read(status_r.get(), report, sizeof report - 1)) < 0 && errno == EINTR) {
  }
  if (got >= static_cast<ssize_t>(sizeof(int))) {
    int err = 0;
    std::memcpy(&err, report, sizeof err);
    ::waitpid(p.pid, nullptr, 0);
    return fail("cannot run '" + req.argv[0] + "': " + std::string(report + sizeof err) + ": " +
                std::strerror(err));
  }
  for (const UniqueFd* fd : {&p.in, &p.out, &p.err}) {
    if (*fd) {
      ::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
    }
  }
  return p;
}

}  // namespace dsec::agent

#include "vmm/jail/supervisor.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "vmm/common/unique_fd.h"
#include "vmm/jail/cgroup.h"

namespace dsec::jail {
namespace {

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

int report_failure(const char* command, const Error& error) {
  (void)std::fprintf(stderr, "dsec-vmm %s: %s\n", command, error.message().c_str());
  return 1;
}

// The child: into the jail, then the command. Never returns.
[[noreturn]] void run_child(const JailConfig& config, const Cgroup& cgroup, UniqueFd alive,
                            const sigset_t& mask, const char* command,
                            const std::function<int(JailedProcess&)>& jailed) {
  // As the supervisor's mask was, but for the forwarded signals: those stay blocked, so
  // that one sent before the VMM reads them waits for it (pid 1 of a namespace would
  // discard a signal it neither blocks nor handles).
  (void)::sigprocmask(SIG_SETMASK, &mask, nullptr);
  int status = 1;
  if (auto entered = cgroup.enter(); !entered) {
    status = report_failure(command, entered.error());
  } else if (auto process = JailedProcess::enter(config, std::move(alive)); !process) {
    status = report_failure(command, process.error());
  } else {
    status = jailed(*process);
  }
  spdlog::default_logger()->flush();
  (void)std::fflush(stdout);
  (void)std::fflush(stderr);
  // Not exit(): the objects of the supervisor's stack, copied by fork, are the
  // supervisor's to destroy (its cgroup above all).
  ::_exit(status);
}

// The child's wait status as the command's exit status, with a line on how it ended.
int exit_status_of(int wait_status, const Cgroup& cgroup, const char* command) {
  if (WIFEXITED(wait_status)) {
    return WEXITSTATUS(wait_status);
  }
  const int signo = WTERMSIG(wait_status);
  const uint64_t oom_kills = cgroup.oom_kills();
  if (signo == SIGKILL && oom_kills > 0) {
    spdlog::error(
        "dsec-vmm {}: the jailed VMM was killed by its cgroup's OOM killer: it used more memory "
        "than its memory.max ({}) allows (memory.events oom_kill {}, cgroup {}) (exit status {})",
        command, cgroup.read("memory.max"), oom_kills, cgroup.path(), kExitOomKilled);
    return kExitOomKilled;
  }
  spdlog::error("dsec-vmm {}: the jailed VMM was killed by signal {} ({}) (exit status {})",
                command, signo, ::strsignal(signo), kExitKilled);
  return kExitKilled;
}

}  // namespace

sigset_t forwarded_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signo : kForwardedSignals) {
    sigaddset(&set, signo);
  }
  return set;
}

int run_jailed_as_pid1(const JailConfig& config, const char* command,
                       const std::function<int(JailedProcess&)>& jailed) {
  if (::getpid() != 1) {
    return report_failure(
        command, Error("jail: --jail-no-supervisor is for a VMM started as pid 1 of a new pid "
                       "namespace by the process that reaps it (dsec-vmm pool's launcher)",
                       0, "leave it out: the VMM then supervises its own jail"));
  }
  // Already blocked by whoever started it, or a signal sent before the VMM reads them would
  // have been dropped (pid 1 of a namespace discards what it neither blocks nor handles).
  const sigset_t forwarded = forwarded_signals();
  (void)::sigprocmask(SIG_BLOCK, &forwarded, nullptr);
  int status = 1;
  if (auto cgroup = Cgroup::create(config); !cgroup) {
    status = report_failure(command, cgroup.error());
  } else if (auto entered = cgroup->enter(); !entered) {
    status = report_failure(command, entered.error());
  } else {
    // /proc is still the host's: its "self" is this process's pid there.
    std::error_code error;
    const auto host_pid = std::filesystem::read_symlink("/proc/self", error);
    spdlog::info("jail: VMM pid {} in {}, cgroup {} (no supervisor: its reaper removes it)",
                 error ? "?" : host_pid.string(), config.dir, cgroup->path());
    cgroup->keep();  // this process is in it until it ends
    if (auto process = JailedProcess::enter(config, UniqueFd()); !process) {
      status = report_failure(command, process.error());
    } else {
      status = jailed(*process);
    }
  }
  spdlog::default_logger()->flush();
  return status;
}

int run_jailed(const JailConfig& config, const char* command,
               const std::function<int(JailedProcess&)>& jailed) {
  auto cgroup = Cgroup::create(config);
  if (!cgroup) {
    return report_failure(command, cgroup.error());
  }
  // Blocked before the fork, so that none is lost: SIGCHLD is read from the signalfd with
  // the others.
  sigset_t watched = forwarded_signals();
  sigaddset(&watched, SIGCHLD);
  sigset_t previous;
  sigemptyset(&previous);
  (void)::sigprocmask(SIG_BLOCK, &watched, &previous);
  sigset_t child_mask = previous;
  for (const int signo : kForwardedSignals) {
    sigaddset(&child_mask, signo);
  }
  struct RestoreMask {
    const sigset_t& mask;
    ~RestoreMask() { (void)::sigprocmask(SIG_SETMASK, &mask, nullptr); }
  } restore_mask{previous};

  UniqueFd signals(::signalfd(-1, &watched, SFD_CLOEXEC));
  if (!signals) {
    return report_failure(command, Error::from_errno("jail: signalfd", errno));
  }
  // The child's end reads EOF once the supervisor is gone: JailedProcess checks that it
  // did not die before the child asked for a signal on its death.
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return report_failure(command, Error::from_errno("jail: pipe2", errno));
  }
  UniqueFd alive_read(pipe_fds[0]);
  const UniqueFd alive_write(pipe_fds[1]);
  // The next child is pid 1 of a new pid namespace; this process stays in the host's.
  if (::unshare(CLONE_NEWPID) != 0) {
    return report_failure(command,
                          Error::from_errno("jail: unshare(CLONE_NEWPID)", errno,
                                            "a jailed VMM starts as root (it drops to --uid/--gid "
                                            "itself)"));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    return report_failure(command, Error::from_errno("jail: fork", errno));
  }
  if (child == 0) {
    run_child(config, *cgroup, std::move(alive_read), child_mask, command, jailed);
  }
  alive_read.reset();
  spdlog::info("jail: VMM pid {} in {}, cgroup {}", child, config.dir, cgroup->path());

  int wait_status = 0;
  for (;;) {
    signalfd_siginfo info{};
    const ssize_t n = ::read(signals.get(), &info, sizeof(info));
    if (n != static_cast<ssize_t>(sizeof(info))) {
      if (n < 0 && errno == EINTR) {
        continue;
      }
      // Cannot watch signals any more: wait for the child without passing them on.
      spdlog::error("jail: reading the supervisor's signalfd: {}", std::strerror(errno));
      (void)::waitpid(child, &wait_status, 0);
      break;
    }
    const int signo = static_cast<int>(info.ssi_signo);
    if (signo == SIGCHLD) {
      if (::waitpid(child, &wait_status, WNOHANG) == child) {
        break;
      }
      continue;
    }
    (void)::kill(child, signo);  // not reaped yet: still our child's pid
  }
  return exit_status_of(wait_status, *cgroup, command);
}

}  // namespace dsec::jail

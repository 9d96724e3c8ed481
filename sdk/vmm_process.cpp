#include "sdk/vmm_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;  // NOLINT(readability-redundant-declaration): spawn's environment

namespace dsec::sdk::detail {
namespace {

// glibc 2.36's <sys/pidfd.h> declares its functions without C linkage: the system calls
// themselves, then.
int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}
int pidfd_send_signal(int pidfd, int signo) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signo, nullptr, 0));
}

// waitid's id type for a pidfd (linux/wait.h; glibc 2.36's <sys/wait.h> lacks it).
constexpr idtype_t kIdPidfd = static_cast<idtype_t>(3);

// posix_spawn's attribute objects, destroyed with their scope.
struct SpawnFileActions {
  posix_spawn_file_actions_t actions{};
  SpawnFileActions() { ::posix_spawn_file_actions_init(&actions); }
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
};
struct SpawnAttributes {
  posix_spawnattr_t attr{};
  SpawnAttributes() { ::posix_spawnattr_init(&attr); }
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attr); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
};

// Whether `pidfd` is readable (its process ended) within `timeout`.
dsec::Result<bool> ended_within(int pidfd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (n >= 0) {
      return n > 0;
    }
    if (errno != EINTR) {
      return fail_errno("poll on the VMM's pidfd", errno);
    }
  }
}

}  // namespace

dsec::Result<VmmProcess> VmmProcess::spawn(const std::string& binary,
                                           const std::vector<std::string>& args,
                                           const std::string& log_path) {
  SpawnFileActions files;
  SpawnAttributes attributes;
  sigset_t all{};
  sigset_t none{};
  sigfillset(&all);
  sigemptyset(&none);
  if (::posix_spawn_file_actions_addopen(&files.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0) !=
          0 ||
      ::posix_spawn_file_actions_addopen(&files.actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0) !=
          0 ||
      ::posix_spawn_file_actions_addopen(&files.actions, STDERR_FILENO, log_path.c_str(),
                                         O_WRONLY | O_CREAT | O_APPEND, 0600) != 0 ||
      ::posix_spawn_file_actions_addclosefrom_np(&files.actions, STDERR_FILENO + 1) != 0 ||
      ::posix_spawnattr_setflags(&attributes.attr,
                                 POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) != 0 ||
      ::posix_spawnattr_setsigmask(&attributes.attr, &none) != 0 ||
      ::posix_spawnattr_setsigdefault(&attributes.attr, &all) != 0) {
    return fail("setting up posix_spawn for " + binary);
  }
  std::vector<char*> argv;
  argv.push_back(
      const_cast<char*>(binary.c_str()));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  for (const auto& arg : args) {
    argv.push_back(
        const_cast<char*>(arg.c_str()));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (const int err = ::posix_spawn(&pid, binary.c_str(), &files.actions, &attributes.attr,
                                    argv.data(), environ);
      err != 0) {
    return fail_errno("starting " + binary, err);
  }
  // Our own child, not reaped yet: its pid cannot have been reused.
  UniqueFd pidfd(pidfd_open(pid));
  if (!pidfd) {
    const int err = errno;
    ::kill(pid, SIGKILL);
    siginfo_t info{};
    ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED);
    return fail_errno("pidfd_open for the VMM " + std::to_string(pid), err,
                      "Linux 5.3 or newer is needed");
  }
  return VmmProcess(pid, std::move(pidfd));
}

VmmProcess& VmmProcess::operator=(VmmProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = other.pid_;
    pidfd_ = std::move(other.pidfd_);
    exit_status_ = other.exit_status_;
  }
  return *this;
}

VmmProcess::~VmmProcess() {
  kill_and_reap();
}

bool VmmProcess::running() const {
  if (!pidfd_ || exit_status_) {
    return false;
  }
  pollfd p{.fd = pidfd_.get(), .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 0;
}

dsec::Result<std::optional<int>> VmmProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (exit_status_ || !pidfd_) {
    return exit_status_;
  }
  if (!DSEC_TRY(ended_within(pidfd_.get(), timeout))) {
    return std::nullopt;
  }
  siginfo_t info{};
  if (::waitid(kIdPidfd, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0) {
    return fail_errno("waitid for the VMM " + std::to_string(pid_), errno,
                      "is SIGCHLD ignored in this process? Its children are then reaped by "
                      "the kernel and their exit statuses lost");
  }
  exit_status_ = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  return exit_status_;
}

dsec::Result<int> VmmProcess::stop(std::chrono::milliseconds grace) {
  if (auto status = DSEC_TRY(wait_for_exit(std::chrono::milliseconds(0)))) {
    return *status;
  }
  DSEC_TRY(signal(SIGTERM));
  if (auto status = DSEC_TRY(wait_for_exit(grace))) {
    return *status;
  }
  DSEC_TRY(signal(SIGKILL));
  // SIGKILL cannot be caught: the process ends as soon as the kernel tears it down.
  for (;;) {
    if (auto status = DSEC_TRY(wait_for_exit(std::chrono::seconds(60)))) {
      return *status;
    }
  }
}

dsec::Status VmmProcess::signal(int signo) const {
  if (pidfd_send_signal(pidfd_.get(), signo) != 0 && errno != ESRCH) {
    return fail_errno("signalling the VMM " + std::to_string(pid_), errno);
  }
  return ok();
}

void VmmProcess::kill_and_reap() {
  if (!pidfd_ || exit_status_) {
    return;
  }
  (void)signal(SIGKILL);
  siginfo_t info{};
  while (::waitid(kIdPidfd, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  exit_status_ = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

}  // namespace dsec::sdk::detail

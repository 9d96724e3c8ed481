#include "vmm/pool/vmm_launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "vmm/jail/cgroup.h"
#include "vmm/jail/jail_config.h"
#include "vmm/jail/supervisor.h"
#include "vmm/pool/launcher_process.h"
#include "vmm/pool/sandbox_dir.h"

namespace dsec::pool {
namespace {

// posix_spawn's attributes and file actions, destroyed however the spawn ends.
struct SpawnSetup {
  posix_spawnattr_t attr{};
  posix_spawn_file_actions_t actions{};
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

// A pipe whose ends sit above the descriptors the child gets (0-3), so that the dup2 onto
// 3 always makes a copy, which drops O_CLOEXEC.
Result<std::pair<UniqueFd, UniqueFd>> ready_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return fail_errno("pipe2 for a VMM's ready line", errno);
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  if (write_end.get() <= kReadyFd) {
    write_end.reset(::fcntl(fds[1], F_DUPFD_CLOEXEC, kReadyFd + 1));
    ::close(fds[1]);
    if (!write_end) {
      return fail_errno("fcntl F_DUPFD_CLOEXEC", errno);
    }
  }
  return std::pair{std::move(read_end), std::move(write_end)};
}

// While it lives, this thread's next child is pid 1 of a new pid namespace
// (unshare(CLONE_NEWPID)); then the thread's children are born in its own again (setns:
// a second unshare of a pid namespace would fail).
class NewPidNamespaceForNextChild {
 public:
  static Result<NewPidNamespaceForNextChild> enter() {
    UniqueFd own(::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC));
    if (!own) {
      return fail_errno("open /proc/self/ns/pid", errno);
    }
    if (::unshare(CLONE_NEWPID) != 0) {
      return fail_errno("unshare(CLONE_NEWPID) for a jailed VMM", errno,
                        "jailing clones needs root, or pass --no-jail");
    }
    return NewPidNamespaceForNextChild(std::move(own));
  }
  NewPidNamespaceForNextChild(NewPidNamespaceForNextChild&&) = default;
  NewPidNamespaceForNextChild& operator=(NewPidNamespaceForNextChild&&) = delete;
  ~NewPidNamespaceForNextChild() {
    if (own_ && ::setns(own_.get(), CLONE_NEWPID) != 0) {
      // Children to come would join the namespace of the one just spawned: none can be
      // started any more, and each launch says so (fork fails once its pid 1 is gone).
      spdlog::error("pool: setns back to the launcher's pid namespace: {}", std::strerror(errno));
    }
  }

 private:
  explicit NewPidNamespaceForNextChild(UniqueFd own) : own_(std::move(own)) {}
  UniqueFd own_;
};

}  // namespace

Result<LaunchedVmm> spawn_with_ready_pipe(const std::vector<std::string>& argv,
                                          const std::string& log_path,
                                          const std::vector<int>& passed,
                                          bool own_pid_namespace) {
  if (argv.empty()) {
    return fail("no command to launch");
  }
  auto [read_end, write_end] = DSEC_TRY(ready_pipe());
  // Copies above every descriptor the child gets, so that no dup2 below overwrites a source
  // before it is copied.
  const int first_free = kReadyFd + 1 + static_cast<int>(passed.size());
  std::vector<UniqueFd> sources;
  for (const int fd : passed) {
    sources.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, first_free));
    if (!sources.back()) {
      return fail_errno("fcntl F_DUPFD_CLOEXEC of a descriptor for a VMM", errno);
    }
  }
  SpawnSetup setup;
  // A process group of its own: the daemon's terminal's signals do not reach it, and the
  // pool's last resort (SIGKILL to the group) reaches all of it.
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  // The daemon blocks SIGTERM and SIGINT to read them synchronously; the VMM must not
  // inherit that, and takes every signal's default. As pid 1 of its own pid namespace it
  // would drop them instead: blocked there until it reads them (jail/supervisor.h).
  const sigset_t mask = [&] {
    sigset_t set;
    sigemptyset(&set);
    return own_pid_namespace ? jail::forwarded_signals() : set;
  }();
  posix_spawnattr_setsigmask(&setup.attr, &mask);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&setup.actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
  posix_spawn_file_actions_adddup2(&setup.actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, write_end.get(), kReadyFd);
  for (size_t i = 0; i < sources.size(); ++i) {
    posix_spawn_file_actions_adddup2(&setup.actions, sources[i].get(),
                                     kReadyFd + 1 + static_cast<int>(i));
  }
  // Nothing else of the daemon's (its socket, other VMMs' pipes) reaches the VMM.
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, first_free);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  {
    std::optional<NewPidNamespaceForNextChild> pid_namespace;
    if (own_pid_namespace) {
      pid_namespace.emplace(DSEC_TRY(NewPidNamespaceForNextChild::enter()));
    }
    if (const int err = ::posix_spawn(&pid, argv[0].c_str(), &setup.actions, &setup.attr,
                                      args.data(), environ);
        err != 0) {
      return fail_errno("cannot start " + argv[0], err);
    }
  }
  // Our child cannot be reaped by anyone else, so its pid is its own until we wait.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    const int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return fail_errno("pidfd_open of a new VMM", err, "the daemon needs Linux 5.3 or newer");
  }
  const auto start = process_start_time(pid);
  if (!start) {
    (void)signal_pidfd(pidfd.get(), SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return std::unexpected(start.error());
  }
  return LaunchedVmm{.identity = {.pid = pid, .start_time = *start},
                     .pidfd = std::move(pidfd),
                     .ready = std::move(read_end)};
}

std::vector<std::string> restore_argv(const std::string& vmm_binary, const CloneLaunch& clone,
                                      const CloneLimits& limits,
                                      const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv{vmm_binary,
                                "restore",
                                "--state-fd",
                                std::to_string(kStateFd),
                                "--memory-fd",
                                std::to_string(kMemoryFd),
                                "--vsock",
                                clone.files.vsock,
                                "--ready-fd",
                                std::to_string(kReadyFd),
                                "--no-host-paths-from-snapshot",
                                "--console",
                                console_path(clone.dir),
                                "--console-limit",
                                std::to_string(limits.console_limit_bytes),
                                "--log-limit",
                                std::to_string(limits.log_limit_bytes)};
  if (!clone.files.api.empty()) {
    argv.insert(argv.end(), {"--api-sock", clone.files.api});
  }
  if (!clone.netns.empty()) {
    argv.insert(argv.end(), {"--netns", clone.netns, "--net", "tap=" + clone.tap});
    if (!clone.net_rate_limiters.empty()) {
      argv.insert(argv.end(), {"--net-rate-limiters", clone.net_rate_limiters});
    }
  }
  if (clone.jail_id) {
    const std::string id = std::to_string(*clone.jail_id);
    argv.insert(argv.end(),
                {"--jail", clone.dir, "--jail-no-supervisor", "--uid", id, "--gid", id,
                 "--cgroup-parent",
                 limits.cgroup_parent, "--cgroup",
                 "memory.max=" + std::to_string(clone.guest_bytes + limits.memory_overhead_bytes),
                 "--cgroup", "pids.max=" + std::to_string(limits.pids_max)});
    if (!limits.cpu_max.empty()) {
      argv.insert(argv.end(), {"--cgroup", "cpu.max=" + limits.cpu_max});
    }
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return argv;
}

// spawn_with_ready_pipe hands its `passed` descriptors on as kReadyFd + 1, + 2, ...
static_assert(kStateFd == kReadyFd + 1 && kMemoryFd == kReadyFd + 2);

Result<LaunchedVmm> RestoreLauncher::launch(const CloneLaunch& clone) {
  if (clone.jail_id) {
    DSEC_TRY(give_sandbox_dir(clone.dir, *clone.jail_id));
  }
  const auto argv = restore_argv(vmm_binary_, clone, limits_, extra_args_);
  // A jailed clone is pid 1 of its own pid namespace from the start, with no supervisor
  // (restore --jail-no-supervisor): its reaper and the remover of its cgroup is the pool.
  const bool own_pid_namespace = clone.jail_id.has_value();
  if (process_) {
    return process_->spawn(argv, clone.files.log, {clone.state_fd, clone.memory_fd},
                           own_pid_namespace);
  }
  return spawn_with_ready_pipe(argv, clone.files.log, {clone.state_fd, clone.memory_fd},
                               own_pid_namespace);
}

bool RestoreLauncher::oom_killed(const std::string& sandbox_dir) {
  jail::JailConfig config;
  config.dir = sandbox_dir;
  config.cgroup_parent = limits_.cgroup_parent;
  return jail::oom_kills_of(jail::cgroup_path(config)) > 0;
}

ProcessEnd RestoreLauncher::reap(int pidfd, pid_t pid) {
  return process_ ? process_->reap(pid) : reap_pidfd(pidfd);
}

bool RestoreLauncher::forget(const std::string& sandbox_dir) {
  jail::JailConfig config;
  config.dir = sandbox_dir;
  config.cgroup_parent = limits_.cgroup_parent;
  left_cgroups_.push_back({.path = jail::cgroup_path(config)});
  return remove_left();
}

bool RestoreLauncher::remove_left() {
  // Tried for about a minute at the pool's pace (docs/pool.md): a process that does not
  // die of SIGKILL in that time is the kernel's to explain.
  constexpr uint32_t kMaxTries = 120;
  std::erase_if(left_cgroups_, [](LeftCgroup& left) {
    if (::rmdir(left.path.c_str()) == 0 || errno == ENOENT) {
      return true;
    }
    if (errno != EBUSY || ++left.tries > kMaxTries) {
      spdlog::warn("pool: cannot remove the cgroup {}: {}", left.path, std::strerror(errno));
      return true;
    }
    // Busy: a process in it, or one that just ended and is not yet gone from it.
    std::ofstream(left.path + "/cgroup.kill") << "1";
    return false;
  });
  return left_cgroups_.empty();
}

}  // namespace dsec::pool

#include "vmm/pool/vmm_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "vmm/jail/jail_config.h"
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

}  // namespace

Result<LaunchedVmm> spawn_with_ready_pipe(const std::vector<std::string>& argv,
                                          const std::string& log_path,
                                          const std::vector<int>& passed) {
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
  // A process group of its own: the daemon's terminal's signals do not reach it, and a
  // jailed VMM's supervisor and child are stopped together.
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  // The daemon blocks SIGTERM and SIGINT to read them synchronously; the VMM must not
  // inherit that, and takes every signal's default.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&setup.attr, &none);
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
  if (const int err =
          ::posix_spawn(&pid, argv[0].c_str(), &setup.actions, &setup.attr, args.data(), environ);
      err != 0) {
    return fail_errno("cannot start " + argv[0], err);
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
  }
  if (clone.jail_id) {
    const std::string id = std::to_string(*clone.jail_id);
    argv.insert(argv.end(),
                {"--jail", clone.dir, "--uid", id, "--gid", id, "--cgroup-parent",
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
  if (process_) {
    return process_->spawn(argv, clone.files.log, {clone.state_fd, clone.memory_fd});
  }
  return spawn_with_ready_pipe(argv, clone.files.log, {clone.state_fd, clone.memory_fd});
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

// How the pool starts a sandbox's VMM: behind a small interface, so that the pool's unit
// tests run its bookkeeping over real child processes that are not VMMs.
//
// Every launch is one process in a process group of its own, with stdin from /dev/null,
// stdout and stderr appended to the sandbox's log file, and descriptor 3 the writing end of
// a pipe: the process writes "ready\n" there once its sandbox serves (`dsec-vmm restore
// --ready-fd 3`), and the pool reads the other end on its event loop.
//
// A jailed clone (docs/jail.md, "The pool's clones") is `dsec-vmm restore --jail DIR`: DIR is the
// sandbox's own directory, owned by the uid and gid the pool gave it, holding its vsock and
// API sockets and its console file; its cgroup is <cgroup parent>/<basename of DIR>.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/pool/process_identity.h"

namespace dsec::pool {

// Where one sandbox's files go: its vsock Unix socket (the agent's endpoint) and its log.
struct SandboxFiles {
  std::string vsock;
  std::string log;
  std::string api;  // its VMM's API socket (pause, resume, snapshot); empty: none
  bool operator==(const SandboxFiles&) const = default;
};

// One clone to start.
struct CloneLaunch {
  // The warm image's files, open and checked by the daemon (image_store.h), which the clone
  // inherits: it opens no image file by path. Borrowed for the launch.
  int state_fd = -1;
  int memory_fd = -1;
  uint64_t guest_bytes = 0;  // its guest RAM (the memory file's size)
  std::string dir;           // the sandbox's own directory: its sockets (files) and console
  SandboxFiles files;
  std::optional<uint32_t> jail_id;  // its uid and gid; none: not jailed (--no-jail)
  // Its network namespace's file and the TAP in it (pool_networks.h); empty: no network.
  std::string netns{};
  std::string tap{};
  // Its network device's rate limiters, restore --net-rate-limiters's JSON; empty: none.
  std::string net_rate_limiters{};
};

// What bounds every clone: its console file, and when jailed, its cgroup.
struct CloneLimits {
  std::string cgroup_parent = "dsec-vmm-pool";  // below /sys/fs/cgroup
  // memory.max is the guest's RAM plus this: the VMM's own memory (docs/jail.md, "The pool's
  // clones").
  uint64_t memory_overhead_bytes = uint64_t{64} << 20;
  // pids.max: the VMM's threads (a vCPU each, 254 at most, and about ten more), with room.
  uint32_t pids_max = 512;
  std::string cpu_max;                               // cpu.max ("QUOTA PERIOD"); empty: none
  uint64_t console_limit_bytes = uint64_t{1} << 20;  // the console file's cap (0: none)
  uint64_t log_limit_bytes = uint64_t{1} << 20;      // the VMM's log's, ID.log (0: none)
};

// The console file in a sandbox's directory.
inline std::string console_path(const std::string& sandbox_dir) {
  return sandbox_dir + "/console";
}

struct LaunchedVmm {
  ProcessIdentity identity;
  UniqueFd pidfd;
  UniqueFd ready;  // the pipe's reading end
};

class VmmLauncher {
 public:
  VmmLauncher() = default;
  VmmLauncher(const VmmLauncher&) = delete;
  VmmLauncher& operator=(const VmmLauncher&) = delete;
  virtual ~VmmLauncher() = default;
  // Starts `clone`; its directory exists (the daemon's: a jailed clone's launcher gives it
  // to the clone's id).
  virtual Result<LaunchedVmm> launch(const CloneLaunch& clone) = 0;
  // The jailed clone whose directory is `sandbox_dir` ended and was reaped: removes what was
  // made for it outside that directory. False when something is left to remove later: the
  // pool calls remove_left() again a little later, until it is true.
  virtual bool forget(const std::string& /*sandbox_dir*/) { return true; }
  virtual bool remove_left() { return true; }
  // Reaps the VMM `pid` behind `pidfd` if it has ended (never waits), and says how it
  // ended: launch()'s children are this process's own, reaped through their pidfds.
  virtual ProcessEnd reap(int pidfd, pid_t /*pid*/) { return reap_pidfd(pidfd); }
  // Whether the OOM killer of the jailed clone's cgroup killed a process of it; asked once
  // it ended, before forget().
  virtual bool oom_killed(const std::string& /*sandbox_dir*/) { return false; }
};

// The descriptors a clone inherits from the daemon besides 0-2: its ready pipe, then its
// image's state and memory files.
inline constexpr int kReadyFd = 3;
inline constexpr int kStateFd = 4;
inline constexpr int kMemoryFd = 5;

// Spawns `argv` as described above (argv[0] a path, not looked up in PATH). The child also
// gets `passed[i]` as its descriptor kReadyFd + 1 + i, and no other of the daemon's. With
// `own_pid_namespace` (root), the child is pid 1 of a new pid namespace, started with
// SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 blocked (restore --jail-no-supervisor).
Result<LaunchedVmm> spawn_with_ready_pipe(const std::vector<std::string>& argv,
                                          const std::string& log_path,
                                          const std::vector<int>& passed = {},
                                          bool own_pid_namespace = false);

// `VMM restore --state-fd 4 --memory-fd 5 --vsock VSOCK --ready-fd 3 --no-host-paths-from-snapshot
// [--api-sock API] --console DIR/console --console-limit N` (the clone opens no host file
// that the snapshot's state names), with a network `--netns NETNS --net tap=TAP` (the TAP
// opened in the clone's own namespace) [--net-rate-limiters JSON], for a jailed clone `--jail DIR --jail-no-supervisor
// --uid ID --gid ID --cgroup-parent P --cgroup memory.max=... --cgroup pids.max=...
// [--cgroup cpu.max=...]`,
// then EXTRA_ARGS (which may add or override settings: a later --cgroup of one file wins).
std::vector<std::string> restore_argv(const std::string& vmm_binary, const CloneLaunch& clone,
                                      const CloneLimits& limits,
                                      const std::vector<std::string>& extra_args);

class LauncherProcess;

class RestoreLauncher final : public VmmLauncher {
 public:
  // With `process` (launcher_process.h), every VMM is started and reaped by that process,
  // the daemon's unfiltered child; without it, by this process.
  RestoreLauncher(std::string vmm_binary, CloneLimits limits, std::vector<std::string> extra_args,
                  std::shared_ptr<LauncherProcess> process = nullptr)
      : vmm_binary_(std::move(vmm_binary)),
        limits_(std::move(limits)),
        extra_args_(std::move(extra_args)),
        process_(std::move(process)) {}
  Result<LaunchedVmm> launch(const CloneLaunch& clone) override;
  ProcessEnd reap(int pidfd, pid_t pid) override;
  bool oom_killed(const std::string& sandbox_dir) override;
  // A jailed clone's cgroup: its VMM has no supervisor to remove it (and a supervised one,
  // adopted from an older daemon, leaves it when its supervisor was killed). Removed here,
  // once the processes still in it are gone; those are killed through cgroup.kill meanwhile.
  bool forget(const std::string& sandbox_dir) override;
  bool remove_left() override;

 private:
  struct LeftCgroup {
    std::string path;
    uint32_t tries = 0;
  };

  std::string vmm_binary_;
  CloneLimits limits_;
  std::vector<std::string> extra_args_;
  std::shared_ptr<LauncherProcess> process_;
  std::vector<LeftCgroup> left_cgroups_;
};

}  // namespace dsec::pool

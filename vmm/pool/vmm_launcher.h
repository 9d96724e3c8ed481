// How the pool starts a sandbox's VMM: behind a small interface, so that the pool's unit
// tests run its bookkeeping over real child processes that are not VMMs.
//
// Every launch is one process in a process group of its own, with stdin from /dev/null,
// stdout and stderr appended to the sandbox's log file, and descriptor 3 the writing end of
// a pipe: the process writes "ready\n" there once its sandbox serves (`dsec-vmm restore
// --ready-fd 3`), and the pool reads the other end on its event loop.
#pragma once

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
  // Starts a clone of the warm image in `snapshot_dir` with `files`.
  virtual Result<LaunchedVmm> launch(const std::string& snapshot_dir,
                                     const SandboxFiles& files) = 0;
};

// Spawns `argv` as described above (argv[0] a path, not looked up in PATH).
Result<LaunchedVmm> spawn_with_ready_pipe(const std::vector<std::string>& argv,
                                          const std::string& log_path);

// `VMM restore SNAPSHOT_DIR --vsock VSOCK --ready-fd 3 --no-host-paths-from-snapshot
// EXTRA_ARGS...`: the clone opens no host file that the snapshot's state names.
class RestoreLauncher final : public VmmLauncher {
 public:
  RestoreLauncher(std::string vmm_binary, std::vector<std::string> extra_args)
      : vmm_binary_(std::move(vmm_binary)), extra_args_(std::move(extra_args)) {}
  Result<LaunchedVmm> launch(const std::string& snapshot_dir, const SandboxFiles& files) override;

 private:
  std::string vmm_binary_;
  std::vector<std::string> extra_args_;
};

}  // namespace dsec::pool

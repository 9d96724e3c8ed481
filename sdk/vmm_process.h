// One VMM process started by the library, supervised through a pidfd: started with its
// stdin and stdout on /dev/null and its stderr in a log file, no descriptor of the caller's
// beyond those three, default signal dispositions and an empty signal mask. Destroying
// it kills and reaps a VMM still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::sdk::detail {

class VmmProcess {
 public:
  // Runs `binary` with `args` (after argv[0]), its stderr appended to `log_path`.
  static dsec::Result<VmmProcess> spawn(const std::string& binary,
                                        const std::vector<std::string>& args,
                                        const std::string& log_path);

  VmmProcess(VmmProcess&& other) noexcept = default;
  VmmProcess& operator=(VmmProcess&& other) noexcept;
  VmmProcess(const VmmProcess&) = delete;
  VmmProcess& operator=(const VmmProcess&) = delete;
  ~VmmProcess();

  pid_t pid() const { return pid_; }
  // Whether it still runs (not reaped, and not ended).
  bool running() const;
  // Waits up to `timeout` for it to end and reaps it; its exit status (128+N when signal N
  // ended it), or nullopt while it still runs.
  dsec::Result<std::optional<int>> wait_for_exit(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL if it has not ended within `grace`; its exit status.
  dsec::Result<int> stop(std::chrono::milliseconds grace);

 private:
  VmmProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  dsec::Status signal(int signo) const;
  void kill_and_reap();

  pid_t pid_ = -1;
  UniqueFd pidfd_;  // empty once moved from
  std::optional<int> exit_status_;
};

}  // namespace dsec::sdk::detail

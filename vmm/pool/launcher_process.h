// The pool daemon's launcher: a child process forked while the daemon has one thread and
// no seccomp filter yet, which starts every VMM for it and reaps them. The daemon's own
// filter (seccomp role "pool") allows no fork or exec, and a filter is inherited by every
// process started after it: a VMM started by the filtered daemon would carry the daemon's
// list on top of its own. Started by the launcher instead, a VMM has only its own filters.
//
// The launcher starts nothing but the VMM binary it was given, as `VMM restore ...`, and
// reaps only its own children. The daemon talks to it over a SOCK_SEQPACKET socket pair,
// one request and its answer at a time (a mutex), descriptors passed with SCM_RIGHTS:
//   spawn: the argv, the log path, whether the VMM is pid 1 of a new pid namespace, and the
//          descriptors the VMM inherits; the answer is the
//          VMM's pid and start time, its pidfd and the reading end of its ready pipe
//          (vmm_launcher.h's spawn_with_ready_pipe, run in the launcher);
//   reap:  a pid whose pidfd became readable; the answer is how it ended;
//   network: a request about the clones' networks (network/clone_network_host.h), which
//          the launcher makes and holds: netlink and nftables need sockets, mounts and
//          setns that the daemon's filter does not allow (docs/network.md).
// The launcher ends when the daemon closes its end, or dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/pool/process_identity.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {

class LauncherProcess {
 public:
  // Answers a network request in the launcher (its text in, the answer's out).
  using NetworkService = std::function<std::string(std::string_view)>;

  // Forks the launcher. The caller has one thread (a fork copies only the caller's).
  // `networks` serves network requests in the launcher; empty: it refuses them.
  static Result<std::unique_ptr<LauncherProcess>> start(const std::string& vmm_binary,
                                                        const NetworkService& networks = {});
  LauncherProcess(const LauncherProcess&) = delete;
  LauncherProcess& operator=(const LauncherProcess&) = delete;
  // Closes the socket, which ends the launcher, and reaps it. Its VMMs live on, adopted by
  // init (a daemon started again adopts them through its state records).
  ~LauncherProcess();

  // spawn_with_ready_pipe(argv, log_path, passed, own_pid_namespace), run by the launcher.
  // argv[0] must be the launcher's VMM binary and argv[1] "restore".
  Result<LaunchedVmm> spawn(const std::vector<std::string>& argv, const std::string& log_path,
                            const std::vector<int>& passed, bool own_pid_namespace = false);
  // How the launcher's child `pid` ended (reaped now), or that it has not, or that it is
  // not the launcher's child.
  ProcessEnd reap(pid_t pid);
  // A network request, answered by the launcher's NetworkService.
  Result<std::string> network(const std::string& request);

  pid_t pid() const { return pid_; }

 private:
  LauncherProcess(UniqueFd socket, pid_t pid) : socket_(std::move(socket)), pid_(pid) {}
  // Sends `request` with `fds`, and receives the answer and the descriptors it carries.
  Result<std::string> call(const std::string& request, const std::vector<int>& fds,
                           std::vector<UniqueFd>& received);

  std::mutex mutex_;
  UniqueFd socket_;
  pid_t pid_;
};

}  // namespace dsec::pool

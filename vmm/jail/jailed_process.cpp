#include "vmm/jail/jailed_process.h"

#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace dsec::jail {
namespace {

// Closes every descriptor from 3 up but those in `keep`.
Status close_inherited_fds(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned int next = 3;
  for (const int fd : keep) {
    if (fd < static_cast<int>(next)) {
      continue;
    }
    if (static_cast<unsigned int>(fd) > next &&
        ::close_range(next, static_cast<unsigned int>(fd) - 1, 0) != 0) {
      return fail_errno("jail: close_range", errno);
    }
    next = static_cast<unsigned int>(fd) + 1;
  }
  if (::close_range(next, UINT_MAX, 0) != 0) {
    return fail_errno("jail: close_range", errno);
  }
  return ok();
}

Status set_limit(int resource, rlim_t value, const char* name) {
  const rlimit limit{.rlim_cur = value, .rlim_max = value};
  if (::setrlimit(resource, &limit) != 0) {
    return fail_errno(std::string("jail: setrlimit ") + name, errno);
  }
  return ok();
}

// The jail's mount (now /) again with nosuid, nodev and noexec: the VMM executes nothing
// and needs no device node it has not opened. Its other flags are kept.
Status harden_root_mount() {
  struct statvfs st {};
  if (::statvfs("/", &st) != 0) {
    return fail_errno("jail: statvfs /", errno);
  }
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC;
  for (const auto& [st_flag, ms_flag] :
       {std::pair{ST_RDONLY, MS_RDONLY}, std::pair{ST_NOATIME, MS_NOATIME},
        std::pair{ST_NODIRATIME, MS_NODIRATIME}, std::pair{ST_RELATIME, MS_RELATIME}}) {
    if ((st.f_flag & st_flag) != 0) {
      flags |= ms_flag;
    }
  }
  if (::mount(nullptr, "/", nullptr, flags, nullptr) != 0) {
    return fail_errno("jail: remounting the jail nosuid,nodev,noexec", errno);
  }
  return ok();
}

}  // namespace

Result<JailedProcess> JailedProcess::enter(const JailConfig& config, UniqueFd supervisor_alive) {
  JailedProcess process(config, std::move(supervisor_alive));
  std::vector<int> keep = config.kept_fds;
  keep.push_back(process.supervisor_alive_.get());
  DSEC_TRY(close_inherited_fds(std::move(keep)));
  // After the close: the copy of the pipe's other end that fork gave this process is gone.
  DSEC_TRY(process.die_with_supervisor());
  // The pid namespace is the supervisor's doing (this process is its first process).
  const int network = config.own_network_namespace ? CLONE_NEWNET : 0;
  if (::unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | network) != 0) {
    return fail_errno("jail: unshare(mount, IPC, UTS, network namespaces)", errno,
                      "a jailed VMM starts as root (it drops to --uid/--gid itself)");
  }
  // Private: nothing mounted or unmounted here reaches the host's namespace (pivot_root
  // also refuses shared mounts).
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return fail_errno("jail: making / private", errno);
  }
  // pivot_root needs the new root to be a mount point: the directory bound onto itself.
  if (::mount(config.dir.c_str(), config.dir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return fail_errno("jail: bind-mounting " + config.dir + " onto itself", errno);
  }
  // Into the bind mount (chdir after it, not before): relative paths name the jail's files
  // from here on, before and after the pivot.
  if (::chdir(config.dir.c_str()) != 0) {
    return fail_errno("jail: chdir " + config.dir, errno);
  }
  constexpr const char* kHostName = "dsec-vmm";
  if (::sethostname(kHostName, std::char_traits<char>::length(kHostName)) != 0) {
    return fail_errno("jail: sethostname", errno);
  }
  return process;
}

Status JailedProcess::lock_down(const std::vector<std::string>& owned_paths) {
  // pivot_root(".", "."): the host's root is stacked on the jail's and then detached
  // (pivot_root(2)), so no directory for it is needed in the jail.
  if (::syscall(SYS_pivot_root, ".", ".") != 0) {
    return fail_errno("jail: pivot_root into " + config_.dir, errno,
                      "the jail directory must be on a file system that allows it");
  }
  if (::umount2(".", MNT_DETACH) != 0) {
    return fail_errno("jail: detaching the host's root", errno);
  }
  if (::chdir("/") != 0) {
    return fail_errno("jail: chdir /", errno);
  }
  DSEC_TRY(harden_root_mount());
  DSEC_TRY(set_limit(RLIMIT_NOFILE, config_.max_open_files, "RLIMIT_NOFILE"));
  DSEC_TRY(set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE"));
  for (const auto& path : owned_paths) {
    if (::lchown(path.c_str(), config_.uid, config_.gid) != 0) {
      return fail_errno("jail: chown " + path, errno);
    }
  }
  if (::setgroups(0, nullptr) != 0) {
    return fail_errno("jail: setgroups", errno);
  }
  if (::setresgid(config_.gid, config_.gid, config_.gid) != 0) {
    return fail_errno("jail: setresgid " + std::to_string(config_.gid), errno);
  }
  // From uid 0 to nonzero real, effective and saved ids: the kernel clears every
  // capability set (capabilities(7)).
  if (::setresuid(config_.uid, config_.uid, config_.uid) != 0) {
    return fail_errno("jail: setresuid " + std::to_string(config_.uid), errno);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return fail_errno("jail: PR_SET_NO_NEW_PRIVS", errno);
  }
  // A change of ids clears the parent-death signal: set it again.
  return die_with_supervisor();
}

Status JailedProcess::die_with_supervisor() const {
  if (!supervisor_alive_) {
    return ok();  // no supervisor (run_jailed_as_pid1): it outlives its reaper, by design
  }
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    return fail_errno("jail: PR_SET_PDEATHSIG", errno);
  }
  // The supervisor may have died before that: then its end of the pipe is closed.
  pollfd pfd{.fd = supervisor_alive_.get(), .events = POLLIN, .revents = 0};
  if (::poll(&pfd, 1, 0) != 0) {
    return fail("jail: the supervisor is gone");
  }
  return ok();
}

}  // namespace dsec::jail

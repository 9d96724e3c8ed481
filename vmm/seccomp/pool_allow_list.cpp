// The pool daemon's allow list (role "pool", docs/seccomp.md): one filter for every thread
// of dsec-vmm-pool, loaded once the daemon has listened on its sockets, recovered its
// sandboxes and forked its launcher (vmm/pool/launcher_process.h), before it serves.
//
// What the daemon does from then on: its event loop and API connections (Unix and TCP,
// TLS), its state directory and image store (records, logs, snapshots copied in), each
// clone's cgroup files, and its clones' VMMs through pidfds and their Unix sockets (the
// agent, the VMM's API). It never starts a program (the launcher does), never maps
// executable memory, opens no network socket but a TCP stream (its listeners are open
// already; the proxy connects to guests), and cannot change its SIGSYS handler (the
// violation report stays).
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "vmm/seccomp/allow_lists.h"
#include "vmm/seccomp/rule_forms.h"

namespace dsec::seccomp {

std::vector<SyscallRule> pool_daemon_allow_list() {
  using rules::allow;
  using rules::allow_if;
  using rules::equals;
  using rules::with;
  // memory: malloc, thread stacks; never executable
  return rules::joined(rules::memory(), {
      // threads (the API's, each background request's): clone with CLONE_THREAD only;
      // clone3, whose flags sit in memory a filter cannot read, fails with ENOSYS, and
      // glibc falls back to clone
      allow_if("clone", {with(0, CLONE_THREAD)}),
      {"clone3", {}, ENOSYS},
      allow("set_robust_list"),
      allow("rseq"),
      allow("futex"),
      allow("sched_yield"),
      allow("sched_getaffinity"),
      allow_if("prctl", {equals(0, PR_SET_NAME)}),
      allow("exit"),
      allow("exit_group"),
      // signals: SIGTERM and SIGINT read by sigwait; handlers return; abort() to itself
      allow("rt_sigprocmask"),
      allow("rt_sigtimedwait"),
      // glibc's own two signals' handlers (SIGCANCEL 32, SIGSETXID 33), which it sets as it
      // starts the first thread; never SIGSYS's
      allow_if("rt_sigaction", {equals(0, 32)}),
      allow_if("rt_sigaction", {equals(0, 33)}),
      allow("rt_sigreturn"),
      allow("restart_syscall"),
      allow("getpid"),
      allow("gettid"),
      allow_if("tgkill", {equals(0, static_cast<uint64_t>(::getpid())), equals(2, SIGABRT)}),
      // time
      allow("clock_gettime"),
      allow("gettimeofday"),
      allow("clock_nanosleep"),
      allow("nanosleep"),
      // the event loop (io_uring) and its eventfds and timers
      allow("io_uring_enter"),
      allow("eventfd2"),
      allow("poll"),
      allow("ppoll"),
      // files: state records, logs, the image store, cgroups, /proc
      allow("openat"),
      allow("close"),
      allow("read"),
      allow("pread64"),
      allow("write"),
      allow("pwrite64"),
      allow("readv"),
      allow("writev"),
      allow("lseek"),
      allow("fstat"),
      allow("newfstatat"),
      allow("statx"),
      allow("fstatfs"),
      allow("statfs"),
      allow("getdents64"),
      allow("mkdir"),
      allow("mkdirat"),
      allow("rmdir"),
      allow("unlink"),
      allow("unlinkat"),
      allow("rename"),
      allow("renameat"),
      allow("renameat2"),
      allow("ftruncate"),
      allow("fallocate"),
      allow("fsync"),
      allow("fdatasync"),
      allow("fchmod"),
      allow("fchmodat"),
      allow("chmod"),
      allow("fchown"),
      allow("fchownat"),
      allow("chown"),
      allow("readlink"),
      allow("readlinkat"),
      allow("access"),
      allow("faccessat"),
      allow("faccessat2"),
      allow("copy_file_range"),
      allow("sendfile"),
      allow("fadvise64"),
      allow("flock"),
      allow("fcntl"),
      allow("dup"),
      allow("dup3"),
      allow("pipe2"),
      // a file PUT into a sandbox is held in a memfd while the agent takes it
      allow("memfd_create"),
      allow("umask"),
      allow("getcwd"),
      allow("utimensat"),
      // sockets: API clients (accepted on listeners open already), and Unix sockets to
      // clones (the agent's vsock socket, a VMM's API), to the launcher; TCP connections
      // to clones' guests, the Host-routed proxy's (host_proxy.h): stream sockets only
      allow_if("socket", {equals(0, AF_UNIX)}),
      allow_if("socket", {equals(0, AF_INET),
                          ArgCondition{.arg = 1,
                                       .mask = ~uint64_t{SOCK_NONBLOCK | SOCK_CLOEXEC},
                                       .value = SOCK_STREAM}}),
      allow("connect"),
      allow("accept4"),
      allow("recvfrom"),
      allow("sendto"),
      allow("recvmsg"),
      allow("sendmsg"),
      allow("shutdown"),
      allow("setsockopt"),
      allow("getsockopt"),
      allow("getsockname"),
      allow("getpeername"),
      // clones' VMMs: signalled and watched through pidfds; a last-resort SIGKILL to a
      // clone's process group; the launcher reaped at the daemon's end
      allow("pidfd_open"),
      allow("pidfd_send_signal"),
      allow_if("kill", {equals(1, SIGKILL)}),
      allow("waitid"),
      allow("wait4"),
      // who the daemon is; entropy (sandbox ids, TLS); the host's memory
      allow("getuid"),
      allow("geteuid"),
      allow("getgid"),
      allow("getegid"),
      allow("getrandom"),
      allow("sysinfo"),
      allow("uname"),
  });
}

}  // namespace dsec::seccomp

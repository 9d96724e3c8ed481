// The seccomp filters of the thread roles (vmm/seccomp): each role's allow list builds, a
// forked child that installs a role's filter lives through the calls the list allows and
// is ended, with the report line, by one it forbids; the lists keep out what no role may do.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <sched.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/support/build_paths.h"
#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "vmm/kvm/linux_kvm.h"
#include "vmm/seccomp/allow_lists.h"
#include "vmm/seccomp/filter.h"
#include "vmm/seccomp/policy.h"
#include "vmm/seccomp/violation_report.h"

namespace dsec::seccomp {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// How a forked child ended, and what it wrote to stderr.
struct ChildEnd {
  int wait_status = 0;
  std::string err;

  int exit_status() const { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }
};

// Runs `body` in a forked child named `name`, its stderr captured; the child exits 0 when
// `body` returns, and 1 when it returns false.
ChildEnd in_child(const char* name, const std::function<bool()>& body) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_NAME, name);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::_exit(body() ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  ChildEnd end;
  char buffer[512];
  ssize_t n = 0;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) {
    end.err.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  ::waitpid(pid, &end.wait_status, 0);
  return end;
}

bool filtered(Role role, Mode mode = Mode::kOn) {
  return Policy{.mode = mode, .selftest = std::nullopt}.apply(role).has_value();
}

TEST(SeccompFilter, EveryRoleBuildsItsFilterFromKnownSystemCalls) {
  for (const Role role : kAllRoles) {
    for (const auto action : {ViolationAction::kTrap, ViolationAction::kLog}) {
      const auto built = Filter::build(role, action);
      EXPECT_TRUE(built.has_value()) << role_name(role) << ": " << built.error().message();
    }
  }
}

TEST(SeccompFilter, EveryRoleCanReportAViolationAndEnd) {
  for (const Role role : kAllRoles) {
    const auto rules = allow_list(role);
    for (const char* needed : {"write", "exit", "exit_group", "rt_sigreturn"}) {
      EXPECT_TRUE(std::ranges::any_of(
          rules, [&](const SyscallRule& r) { return r.syscall == needed && r.conditions.empty(); }))
          << role_name(role) << " lacks " << needed;
    }
  }
}

TEST(SeccompFilter, NoRoleStartsProgramsTracesOrMakesExecutableMemory) {
  for (const Role role : kAllRoles) {
    for (const SyscallRule& rule : allow_list(role)) {
      for (const char* never :
           {"execve", "execveat", "fork", "vfork", "clone", "clone3", "ptrace", "process_vm_writev",
            "process_vm_readv", "kexec_load", "init_module", "finit_module", "bpf",
            "perf_event_open", "mount", "pivot_root", "setuid", "chroot", "pkey_mprotect"}) {
        EXPECT_NE(rule.syscall, never) << role_name(role);
      }
      if (rule.syscall == "mmap" || rule.syscall == "mprotect") {
        EXPECT_THAT(rule.conditions, testing::Contains(ArgCondition{2, PROT_EXEC, 0}))
            << role_name(role) << ": " << rule.syscall;
      }
      if (rule.syscall == "socket") {
        EXPECT_THAT(rule.conditions, testing::Contains(ArgCondition{0, ~uint64_t{0}, AF_UNIX}))
            << role_name(role);
      }
    }
  }
}

// The pool daemon's list (role pool) starts threads, but never a program: clone only with
// CLONE_THREAD, clone3 only as a failure (ENOSYS), and its signal handlers stay (the
// violation report).
TEST(SeccompFilter, ThePoolDaemonStartsThreadsButNoProgramNorExecutableMemory) {
  EXPECT_TRUE(Filter::build(Role::kPoolDaemon, ViolationAction::kTrap).has_value());
  EXPECT_EQ(role_named("pool"), Role::kPoolDaemon);
  for (const SyscallRule& rule : allow_list(Role::kPoolDaemon)) {
    for (const char* never :
         {"execve", "execveat", "fork", "vfork", "ptrace", "process_vm_writev", "process_vm_readv",
          "kexec_load", "init_module", "finit_module", "bpf", "perf_event_open", "mount",
          "pivot_root", "setuid", "setgid", "chroot", "pkey_mprotect", "unshare",
          "setns", "io_uring_setup", "io_uring_register"}) {
      EXPECT_NE(rule.syscall, never);
    }
    if (rule.syscall == "clone") {
      EXPECT_THAT(rule.conditions,
                  testing::ElementsAre(ArgCondition{0, CLONE_THREAD, CLONE_THREAD}));
    }
    if (rule.syscall == "clone3") {
      EXPECT_EQ(rule.error, ENOSYS);
    }
    if (rule.syscall == "rt_sigaction") {  // glibc's own signals, never SIGSYS
      ASSERT_EQ(rule.conditions.size(), 1U);
      EXPECT_NE(rule.conditions[0].value, static_cast<uint64_t>(SIGSYS));
      EXPECT_EQ(rule.conditions[0].mask, ~uint64_t{0});
    }
    if (rule.syscall == "mmap" || rule.syscall == "mprotect") {
      EXPECT_THAT(rule.conditions, testing::Contains(ArgCondition{2, PROT_EXEC, 0}));
    }
    // Unix sockets, and TCP streams for the Host-routed proxy: never UDP, raw or packet.
    if (rule.syscall == "socket") {
      EXPECT_THAT(rule.conditions,
                  testing::AnyOf(
                      testing::ElementsAre(ArgCondition{0, ~uint64_t{0}, AF_UNIX}),
                      testing::ElementsAre(
                          ArgCondition{0, ~uint64_t{0}, AF_INET},
                          ArgCondition{1, ~uint64_t{SOCK_NONBLOCK | SOCK_CLOEXEC}, SOCK_STREAM})));
    }
  }
}

TEST(SeccompFilter, AnAllowedCallLeavesTheThreadRunning) {
  const ChildEnd end = in_child("dsec-vcpu0", [] {
    if (!filtered(Role::kVcpu)) {
      return false;
    }
    const char line[] = "still here\n";
    return ::write(STDERR_FILENO, line, sizeof line - 1) > 0;
  });
  EXPECT_EQ(end.exit_status(), 0) << end.err;
  EXPECT_THAT(end.err, HasSubstr("still here"));
}

TEST(SeccompFilter, AForbiddenCallEndsTheProcessNamingTheThreadAndTheCall) {
  const ChildEnd end = in_child(
      "dsec-vcpu0", [] { return filtered(Role::kVcpu) && ::socket(AF_UNIX, SOCK_STREAM, 0) >= 0; });
  EXPECT_EQ(end.exit_status(), kViolationExitStatus) << end.err;
  EXPECT_EQ(end.err,
            "dsec-vmm: seccomp: thread \"dsec-vcpu0\" (role vcpu) made forbidden syscall 41 "
            "(socket) with arguments 0x1, 0x1, 0x0; killing the process\n");
}

TEST(SeccompFilter, ArgumentRulesAllowOnlyTheNamedIoctlsAndSocketDomains) {
  // A vCPU may ask KVM_RUN of its fd (here the wrong kind of fd: ENOTTY, but allowed)...
  const ChildEnd run = in_child("dsec-vcpu0", [] {
    return filtered(Role::kVcpu) && ::ioctl(STDIN_FILENO, KVM_RUN, 0) == -1 && errno == ENOTTY;
  });
  EXPECT_EQ(run.exit_status(), 0) << run.err;
  // ...but not create a VM.
  const ChildEnd create = in_child("dsec-vcpu0", [] {
    return filtered(Role::kVcpu) && ::ioctl(STDIN_FILENO, KVM_CREATE_VM, 0) >= 0;
  });
  EXPECT_EQ(create.exit_status(), kViolationExitStatus) << create.err;
  EXPECT_THAT(create.err, HasSubstr("forbidden syscall 16 (ioctl)"));
  // The event loop connects Unix sockets for vsock, never network ones.
  const ChildEnd unix_socket = in_child("dsec-io", [] {
    return filtered(Role::kEventLoop) && ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0;
  });
  EXPECT_EQ(unix_socket.exit_status(), 0) << unix_socket.err;
  const ChildEnd inet_socket = in_child("dsec-io", [] {
    return filtered(Role::kEventLoop) && ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0;
  });
  EXPECT_EQ(inet_socket.exit_status(), kViolationExitStatus) << inet_socket.err;
  EXPECT_THAT(inet_socket.err,
              HasSubstr("thread \"dsec-io\" (role io) made forbidden syscall 41 (socket)"));
  // The pool daemon opens TCP streams for its proxy, with any flags, and nothing else of IP.
  const ChildEnd tcp = in_child("dsec-pool", [] {
    return filtered(Role::kPoolDaemon) &&
           ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) >= 0;
  });
  EXPECT_EQ(tcp.exit_status(), 0) << tcp.err;
  const ChildEnd udp = in_child("dsec-pool", [] {
    return filtered(Role::kPoolDaemon) && ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0) >= 0;
  });
  EXPECT_EQ(udp.exit_status(), kViolationExitStatus) << udp.err;
  const ChildEnd inet6 = in_child("dsec-pool", [] {
    return filtered(Role::kPoolDaemon) && ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0;
  });
  EXPECT_EQ(inet6.exit_status(), kViolationExitStatus) << inet6.err;
}

TEST(SeccompFilter, MemoryMayBeMappedButNeverExecutable) {
  const ChildEnd data = in_child("dsec-api", [] {
    return filtered(Role::kApi) && ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED;
  });
  EXPECT_EQ(data.exit_status(), 0) << data.err;
  const ChildEnd code = in_child("dsec-api", [] {
    return filtered(Role::kApi) && ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED;
  });
  EXPECT_EQ(code.exit_status(), kViolationExitStatus) << code.err;
  EXPECT_THAT(code.err, HasSubstr("forbidden syscall 9 (mmap)"));
}

TEST(SeccompFilter, TheFilterIsTheCallingThreadsAlone) {
  // A thread started before the filter went in keeps running unfiltered.
  const ChildEnd end = in_child("dsec-vmm", [] {
    int fd = -1;
    std::mutex m;
    std::condition_variable cv;
    bool go = false;
    std::thread other([&] {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return go; });
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    });
    const bool applied = filtered(Role::kProfiler);
    {
      const std::lock_guard lock(m);
      go = true;
    }
    cv.notify_all();
    other.join();
    return applied && fd >= 0;
  });
  EXPECT_EQ(end.exit_status(), 0) << end.err;
}

TEST(SeccompFilter, LogModeLetsAForbiddenCallRun) {
  const ChildEnd end = in_child("dsec-vcpu0", [] {
    return filtered(Role::kVcpu, Mode::kLog) &&
           ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0;
  });
  EXPECT_EQ(end.exit_status(), 0) << end.err;
}

TEST(SeccompPolicy, TheSelftestMakesItsRolesThreadCallWhatNoRoleMay) {
  const Policy on{.mode = Mode::kOn, .selftest = Role::kSignals};
  // Another role's thread is left alone...
  const ChildEnd other =
      in_child("dsec-io", [&] { return on.apply(Role::kEventLoop).has_value(); });
  EXPECT_EQ(other.exit_status(), 0) << other.err;
  EXPECT_THAT(other.err, IsEmpty());
  // ...the named one is ended.
  const ChildEnd named =
      in_child("dsec-signals", [&] { return on.apply(Role::kSignals).has_value(); });
  EXPECT_EQ(named.exit_status(), kViolationExitStatus) << named.err;
  const std::array<unsigned long, 3> inet_stream = {AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0};
  EXPECT_EQ(named.err, violation_line("dsec-signals", Role::kSignals, SYS_socket, inet_stream));
  // With the filters off, the call runs.
  const Policy off{.mode = Mode::kOff, .selftest = Role::kSignals};
  const ChildEnd unfiltered =
      in_child("dsec-signals", [&] { return off.apply(Role::kSignals).has_value(); });
  EXPECT_EQ(unfiltered.exit_status(), 0) << unfiltered.err;
}

// docs/seccomp.md's heading of each role's list, "### vcpu (19 calls, 4 ioctls)", counts
// what the list allows, and the page names every call of every list.
TEST(SeccompDocs, ThePageCountsAndNamesWhatEachRoleMayCall) {
  const std::string page = test::file_text(dsec::test::source_path("/docs/seccomp.md"));
  ASSERT_FALSE(page.empty());
  std::vector<Role> roles(kAllRoles.begin(), kAllRoles.end());
  roles.push_back(Role::kPoolDaemon);
  for (const Role role : roles) {
    std::set<std::string_view> calls;
    std::set<uint64_t> requests;
    for (const SyscallRule& rule : allow_list(role)) {
      calls.insert(rule.syscall);
      if (rule.syscall == "ioctl") {
        requests.insert(rule.conditions.at(0).value);
      }
      EXPECT_THAT(page, HasSubstr("`" + std::string(rule.syscall) + "`")) << rule.syscall;
    }
    std::string heading =
        "### " + std::string(role_name(role)) + " (" + std::to_string(calls.size()) + " calls";
    if (!requests.empty()) {
      heading +=
          ", " + std::to_string(requests.size()) + (requests.size() == 1 ? " ioctl)" : " ioctls)");
    } else {
      heading += ")";
    }
    EXPECT_THAT(page, HasSubstr(heading + "\n")) << role_name(role);
  }
}

TEST(SeccompPolicy, ModesAndRolesHaveTheNamesTheDocsUse) {
  for (const Mode mode : {Mode::kOn, Mode::kLog, Mode::kOff}) {
    EXPECT_EQ(mode_named(mode_name(mode)), mode);
  }
  EXPECT_EQ(mode_named("enforce"), std::nullopt);
  for (const Role role : kAllRoles) {
    EXPECT_EQ(role_named(role_name(role)), role);
  }
  EXPECT_EQ(role_named("vcpu"), Role::kVcpu);
  EXPECT_EQ(role_named("io"), Role::kEventLoop);
  EXPECT_EQ(role_named("nobody"), std::nullopt);
}

TEST(SeccompPolicy, TheSelftestVariableMustNameARole) {
  ASSERT_EQ(::setenv(kSelftestVariable, "api", 1), 0);
  const auto named = policy_for(Mode::kOff);
  ASSERT_OK(named);
  EXPECT_EQ(named->selftest, Role::kApi);
  ASSERT_EQ(::setenv(kSelftestVariable, "gpu", 1), 0);
  const auto wrong = policy_for(Mode::kOff);
  ::unsetenv(kSelftestVariable);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_THAT(wrong.error().message(), HasSubstr("DSEC_SECCOMP_SELFTEST=gpu names no thread role"));
  EXPECT_THAT(wrong.error().message(), HasSubstr("vcpu"));
  const auto unset = policy_for(Mode::kOn);
  ASSERT_OK(unset);
  EXPECT_EQ(unset->selftest, std::nullopt);
}

}  // namespace
}  // namespace dsec::seccomp

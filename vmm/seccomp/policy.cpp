#include "vmm/seccomp/policy.h"

#include <linux/seccomp.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

#include "vmm/seccomp/filter.h"
#include "vmm/seccomp/violation_report.h"

namespace dsec::seccomp {
namespace {

// Whether this kernel has seccomp filters that can take `action` (4.14 or newer).
Status check_kernel(Mode mode) {
  uint32_t action = mode == Mode::kLog ? SECCOMP_RET_LOG : SECCOMP_RET_TRAP;
  if (::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
    return fail_errno(std::string("--seccomp=") + std::string(mode_name(mode)) +
                          ": this kernel cannot filter system calls that way",
                      errno, "run on Linux 4.14 or newer with seccomp, or give --seccomp=off");
  }
  return ok();
}

Result<std::optional<Role>> selftest_from_environment() {
  const char* value = std::getenv(kSelftestVariable);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  if (auto role = role_named(value)) {
    return role;
  }
  std::string roles;
  for (const Role role : kAllRoles) {
    roles += (roles.empty() ? "" : ", ") + std::string(role_name(role));
  }
  return fail(std::string(kSelftestVariable) + "=" + value + " names no thread role",
              "give one of " + roles + ", or unset it (it is a test hook)");
}

// The self-test's forbidden call: a UDP socket, which no role may open (the pool may open
// TCP streams, for its proxy).
void provoke_violation(Role role) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  // Reached only when the call was let through (--seccomp=log or off).
  spdlog::warn("seccomp: {}: the {} thread opened a network socket ({}), which its filter forbids",
               kSelftestVariable, role_name(role), fd >= 0 ? "it was let through" : "it failed");
  if (fd >= 0) {
    ::close(fd);
  }
}

}  // namespace

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::kOn:
      return "on";
    case Mode::kLog:
      return "log";
    case Mode::kOff:
      return "off";
  }
  return "?";
}

std::optional<Mode> mode_named(std::string_view name) {
  for (const Mode mode : {Mode::kOn, Mode::kLog, Mode::kOff}) {
    if (mode_name(mode) == name) {
      return mode;
    }
  }
  return std::nullopt;
}

Status Policy::apply(Role role) const {
  return apply_in(role, Threads::kCalling);
}

Status Policy::apply_to_process(Role role) const {
  return apply_in(role, Threads::kAll);
}

Status Policy::apply_in(Role role, Threads threads) const {
  if (mode != Mode::kOff) {
    prepare_process();
    if (threads == Threads::kAll) {
      prepare_process_violation_report(role);
    } else {
      prepare_violation_report(role);
    }
    const auto filter = DSEC_TRY(
        Filter::build(role, mode == Mode::kLog ? ViolationAction::kLog : ViolationAction::kTrap));
    DSEC_TRY(threads == Threads::kAll ? filter.load_all_threads() : filter.load());
  }
  if (selftest == role) {
    provoke_violation(role);
  }
  return ok();
}

void prepare_process() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The time zone, which glibc reads at the process's first conversion to local time.
    const time_t now = ::time(nullptr);
    tm local{};
    ::localtime_r(&now, &local);
    // One malloc arena for every thread (each keeps its own small cache, tcache): glibc
    // would give threads arenas of their own, count the CPUs in /sys to size their number,
    // and read /proc/sys/vm/overcommit_memory before it first shrinks one's heap.
    ::mallopt(M_ARENA_MAX, 1);
    // stdout's buffering, which stdio picks at its first write: where stdout is a character
    // device (a terminal, /dev/null) it asks whether it is a terminal with ioctl(TCGETS),
    // which no role allows (`warm` prints its directory from its filtered main thread). The
    // same choice, now, with a buffer of our own so that none is allocated later either.
    static char stdout_buffer[BUFSIZ];
    (void)std::setvbuf(stdout, stdout_buffer, ::isatty(STDOUT_FILENO) != 0 ? _IOLBF : _IOFBF,
                       sizeof stdout_buffer);
  });
}

Result<Policy> policy_for(Mode mode) {
  if (mode != Mode::kOff) {
    DSEC_TRY(check_kernel(mode));
    prepare_process();
  }
  return Policy{.mode = mode, .selftest = DSEC_TRY(selftest_from_environment())};
}

}  // namespace dsec::seccomp

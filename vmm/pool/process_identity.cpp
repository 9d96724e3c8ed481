#include "vmm/pool/process_identity.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

namespace dsec::pool {

Result<uint64_t> process_start_time(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  std::ifstream in(path);
  std::string stat;
  if (!in || !std::getline(in, stat)) {
    return fail("process " + std::to_string(pid) + " is gone (" + path + " unreadable)");
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count
  // from the last ')'. Field 3 (state) is the first after it; start time is field 22.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return fail(path + ": no ')' in \"" + stat + "\"");
  }
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int n = 3; n <= 22; ++n) {
    if (!(fields >> field)) {
      return fail(path + ": fewer than 22 fields");
    }
  }
  uint64_t start = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), start);
  if (ec != std::errc() || end != field.data() + field.size()) {
    return fail(path + ": start time \"" + field + "\" is not a number");
  }
  return start;
}

Result<ProcessIdentity> identify_process(pid_t pid) {
  return ProcessIdentity{.pid = pid, .start_time = DSEC_TRY(process_start_time(pid))};
}

Result<UniqueFd> open_pidfd(const ProcessIdentity& identity) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, identity.pid, 0)));
  if (!pidfd) {
    return fail_errno("pidfd_open of process " + std::to_string(identity.pid), errno);
  }
  const auto start = process_start_time(identity.pid);
  if (!start || *start != identity.start_time || pidfd_exited(pidfd.get())) {
    return fail("process " + std::to_string(identity.pid) +
                " is gone (its pid is free, or another process has it now)");
  }
  return pidfd;
}

bool pidfd_exited(int pidfd) {
  pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1;
}

Status signal_pidfd(int pidfd, int signo) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, signo, nullptr, 0) != 0 && errno != ESRCH) {
    return fail_errno("pidfd_send_signal", errno);
  }
  return ok();
}

ProcessEnd reap_pidfd(int pidfd) {
  siginfo_t info{};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
               WEXITED | WNOHANG) != 0) {
    return {.how = "ended (not this daemon's child: how is unknown)", .exit_status = {}};
  }
  if (info.si_pid == 0) {
    return {.how = "has not ended", .exit_status = {}};
  }
  if (info.si_code == CLD_EXITED) {
    return {.how = "exited with status " + std::to_string(info.si_status),
            .exit_status = info.si_status};
  }
  return {.how = "killed by signal " + std::to_string(info.si_status), .exit_status = {}};
}

}  // namespace dsec::pool

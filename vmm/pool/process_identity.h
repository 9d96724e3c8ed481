// A process named so that a pid the kernel gave to someone else since is never mistaken
// for it: its pid and its start time (field 22 of /proc/PID/stat, clock ticks since boot).
// The pool keeps these in its state records, so that a restarted daemon adopts only the
// VMMs it started, and signals them through pidfds only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::pool {

struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;  // clock ticks after boot
  bool operator==(const ProcessIdentity&) const = default;
};

// `pid`'s start time; fails when there is no such process.
Result<uint64_t> process_start_time(pid_t pid);
Result<ProcessIdentity> identify_process(pid_t pid);

// A pidfd for the process `identity` names, or an error when that process is gone (the
// pid is free, or another process has it now). The pidfd is opened first and the start
// time read after, so the answer cannot be about a pid reused in between.
Result<UniqueFd> open_pidfd(const ProcessIdentity& identity);

// Whether the process behind `pidfd` has ended (its pidfd is readable).
bool pidfd_exited(int pidfd);
// Sends `signo` through `pidfd`; a process that ended already is no error.
Status signal_pidfd(int pidfd, int signo);
// How a process ended.
struct ProcessEnd {
  std::string how;                 // "exited with status 3", "killed by signal 9", ...
  std::optional<int> exit_status;  // when it exited, and we know it
};
// Reaps the process behind `pidfd` if it has ended (never waits), and says how it ended; for a
// process that is not our child (a VMM adopted after a restart) that is unknown, and says so.
ProcessEnd reap_pidfd(int pidfd);

}  // namespace dsec::pool

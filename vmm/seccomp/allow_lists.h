// What each thread role may ask of the kernel: its seccomp allow list, as data
// (allow_lists.cpp, the one place to review them; docs/seccomp.md says why each is there).
// Everything a list does not allow is a violation (filter.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "vmm/seccomp/role.h"

namespace dsec::seccomp {

// (argument `arg` & mask) == value, with the argument as the kernel sees it (64 bits).
struct ArgCondition {
  unsigned arg = 0;
  uint64_t mask = 0;
  uint64_t value = 0;

  bool operator==(const ArgCondition&) const = default;
};

// One allowed form of a system call: the call, by libseccomp's name, and up to two
// conditions on its arguments, both of which must hold. A call may have several rules:
// any one that matches allows it.
struct SyscallRule {
  std::string_view syscall;
  std::vector<ArgCondition> conditions;
  // Not 0: the call is not allowed but fails with this errno (the pool daemon's clone3,
  // ENOSYS, so that glibc starts threads with clone, whose flags a filter can read).
  int error = 0;

  bool operator==(const SyscallRule&) const = default;
};

// The role's allow list. It names this process's id and the vCPU kick signal (a thread
// may signal only its own process's threads), so it is made at run time, for the calling
// process.
std::vector<SyscallRule> allow_list(Role role);

// The pool daemon's list (pool_allow_list.cpp), which allow_list(Role::kPoolDaemon) returns.
std::vector<SyscallRule> pool_daemon_allow_list();

// What the sanitizer runtime of an ASan build (-DDSEC_SANITIZE=ON, a test build) needs in
// every thread, on top of its role's list: LeakSanitizer's check as the process exits
// clones a tracer thread that ptrace-stops the others and reads /proc/self/task, and an
// ASan report reads /proc/self/maps. Empty in every other build, whose filters never allow
// these.
std::vector<SyscallRule> sanitizer_runtime_allow_list();

}  // namespace dsec::seccomp

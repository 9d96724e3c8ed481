// What a violation looks like: SECCOMP_RET_TRAP raises SIGSYS in the thread that made the
// forbidden call, and this handler writes one line to stderr,
//   dsec-vmm: seccomp: thread "dsec-vcpu0" (role vcpu) made forbidden syscall 41 (socket)
//   with arguments 0x2, 0x80001, 0x0; killing the process
// (one line),
// and ends the process with kViolationExitStatus. It runs in a signal handler, so it only
// copies what was prepared before the thread's filter loaded (the thread's name and role,
// the names of the system calls) and calls write(2) and _exit(2).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "vmm/seccomp/role.h"

namespace dsec::seccomp {

// The VMM's exit status after a violation (dsec-vmm run --help).
inline constexpr int kViolationExitStatus = 4;

// Prepares the calling thread's report: its name as the kernel knows it (set it first)
// and `role`. Installs the SIGSYS handler, once per process.
void prepare_violation_report(Role role);

// Prepares the report of every thread that prepared none (thread "*"): for a process whose
// one filter goes into all its threads at once (the pool daemon).
void prepare_process_violation_report(Role role);

// The line the handler writes for `syscall` with its first `arguments` in a thread
// `thread_name` of `role`.
std::string violation_line(std::string_view thread_name, Role role, int syscall,
                           std::span<const unsigned long> arguments);

}  // namespace dsec::seccomp

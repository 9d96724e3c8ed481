// How a VMM uses seccomp (`--seccomp=on|log|off`, docs/seccomp.md): the mode, carried in
// MachineConfig to every thread the VMM starts, and the test hook. Each thread calls
// apply() with its role once its set-up is done, before it does any of its work.
#pragma once

#include <optional>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/seccomp/role.h"

namespace dsec::seccomp {

enum class Mode {
  kOn,   // a forbidden call ends the VMM, with a line that names the thread and the call
  kLog,  // a forbidden call runs; the kernel logs it (its audit log, or dmesg)
  kOff,  // no filters
};

// "on", "log", "off".
std::string_view mode_name(Mode mode);
std::optional<Mode> mode_named(std::string_view name);

// The test hook: DSEC_SECCOMP_SELFTEST=<role> (role_name) makes that role's thread call
// socket(AF_INET, SOCK_DGRAM, ...), which no role may, right after its filter loaded. The e2e tests
// use it to show that a forbidden call ends the VMM; nothing the guest does can set it.
inline constexpr const char* kSelftestVariable = "DSEC_SECCOMP_SELFTEST";

struct Policy {
  Mode mode = Mode::kOn;
  std::optional<Role> selftest;  // from kSelftestVariable

  // Installs `role`'s filter in the calling thread (nothing when off), after preparing the
  // report of a violation with the thread's name: name the thread first. Then runs the
  // self-test if it names `role`.
  Status apply(Role role) const;
  // The same, for every thread of the process at once (the pool daemon, whose threads all
  // have `role`, and those it starts later inherit it).
  Status apply_to_process(Role role) const;

  bool operator==(const Policy&) const = default;

 private:
  enum class Threads { kCalling, kAll };
  Status apply_in(Role role, Threads threads) const;
};

// Readies the process for filters, before it starts its first thread (policy_for() and
// Machine::create() and restore() call it when filters are on; once per process): glibc
// reads some files the first time it needs them, and a thread whose filter forbids open()
// must not be the first. The time zone is read now, and every thread shares the main
// malloc arena: glibc reads /sys to size its number of arenas and
// /proc/sys/vm/overcommit_memory before it first shrinks the heap of one of its own.
void prepare_process();

// The policy of `--seccomp=<mode>` for this process: the mode, checked against the kernel
// (an Error says what is missing), and the self-test read from the environment. Calls
// prepare_process() unless the mode is off.
Result<Policy> policy_for(Mode mode);

}  // namespace dsec::seccomp

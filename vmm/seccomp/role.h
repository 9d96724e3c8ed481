// The roles of a running VMM's threads. Each thread has one, and each role has a seccomp
// filter of its own (allow_lists.cpp), which the thread installs itself once its set-up is
// done and before it does any of its work (docs/seccomp.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dsec::seccomp {

enum class Role : uint8_t {
  kMain,          // the command's thread: starts the VM, waits for it, tears it down
  kVcpu,          // one per vCPU: the KVM_RUN loop and the port and MMIO exits
  kEventLoop,     // "dsec-io": the VM's io_uring loop, every virtio device's I/O
  kConsoleInput,  // "dsec-console": the serial console's host side (output and input)
  kSignals,       // "dsec-signals": SIGINT, SIGTERM and SIGUSR1 from a signalfd
  kApi,           // "dsec-api": the API socket's loop and its requests
  kProfiler,      // "dsec-profiler": kicks the vCPUs for --profile-guest's samples
  // Not a VMM's: every thread of the pool daemon (dsec-vmm-pool), whose filter goes into
  // all of them at once (pool_allow_list.cpp).
  kPoolDaemon,
};

inline constexpr std::array kAllRoles{Role::kMain,         Role::kVcpu,    Role::kEventLoop,
                                      Role::kConsoleInput, Role::kSignals, Role::kApi,
                                      Role::kProfiler};

// kAllRoles are the VMM's roles; kPoolDaemon is the daemon's.
// "main", "vcpu", "io", "console", "signals", "api", "profiler", "pool": the role's name in logs,
// in docs/seccomp.md and in DSEC_SECCOMP_SELFTEST.
std::string_view role_name(Role role);
std::optional<Role> role_named(std::string_view name);

}  // namespace dsec::seccomp

#include "vmm/seccomp/role.h"

namespace dsec::seccomp {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kMain:
      return "main";
    case Role::kVcpu:
      return "vcpu";
    case Role::kEventLoop:
      return "io";
    case Role::kConsoleInput:
      return "console";
    case Role::kSignals:
      return "signals";
    case Role::kApi:
      return "api";
    case Role::kProfiler:
      return "profiler";
    case Role::kPoolDaemon:
      return "pool";
  }
  return "?";
}

std::optional<Role> role_named(std::string_view name) {
  for (const Role role : kAllRoles) {
    if (role_name(role) == name) {
      return role;
    }
  }
  if (role_name(Role::kPoolDaemon) == name) {
    return Role::kPoolDaemon;
  }
  return std::nullopt;
}

}  // namespace dsec::seccomp

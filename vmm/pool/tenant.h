// Who a pool request comes from, as the pool's domain logic sees it: a tenant, with its
// name (the owner recorded on each sandbox it acquires), whether it is the operator (who
// registers images), and its quotas. tenant_access.h learns it from a request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dsec::pool {

struct TenantQuota {
  std::optional<uint32_t> max_sandboxes;     // acquired at once; none: no limit
  std::optional<uint64_t> max_memory_bytes;  // their images' guest memory together
  bool operator==(const TenantQuota&) const = default;
};

struct Tenant {
  // "uid:N" for a Unix-socket caller, a tokens file's name for a TCP one.
  std::string name;
  // Registers and changes images, and sees the pool's own clones (ready, starting).
  bool is_operator = false;
  TenantQuota quota;
  bool operator==(const Tenant&) const = default;
};

}  // namespace dsec::pool

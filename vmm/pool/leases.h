// An acquired sandbox's lease: its time to live, and its idle timeout, which every request
// that names it (GET, exec, keepalive) renews; a client that went away stops renewing, and
// the sandbox is stopped. The idle timeout waits while a request runs in the sandbox
// (Sandbox::agent_requests). The lease's end is the sandbox's one timer
// (SandboxLifecycle::set_timer) while it is in use.
#pragma once

#include "vmm/pool/clone_resources.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_lifecycle.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/tenant.h"

namespace dsec::pool {

class Leases {
 public:
  Leases(SandboxLifecycle& lifecycle, CloneResources& resources, PoolCounters& counters);

  // Hands ready `sandbox` to `caller`, with the time to live and idle timeout `request`
  // asks for, else those of its image (`spec`), and the request's egress policy (already
  // combined with the image's: caller_egress). Fails, granting nothing, when that policy
  // could not be set.
  PoolResult<void> grant(Sandbox& sandbox, const Tenant& caller, const AcquireRequest& request,
                         const ImageSpec& spec);
  // Ends the lease `ttl_s` seconds from now (0: never), whatever it was granted with.
  void set_time_to_live(Sandbox& sandbox, uint64_t ttl_s);
  // Arms the timer for the lease's next end: its time to live or its idle timeout.
  void arm(Sandbox& sandbox);

 private:
  void on_end(Sandbox& sandbox);

  SandboxLifecycle& lifecycle_;
  CloneResources& resources_;
  PoolCounters& counters_;
};

}  // namespace dsec::pool

// The sandbox pool: warm images and their limits, and one VMM process per sandbox,
// supervised on one event loop (the daemon's: its API thread's). Everything here runs on
// the loop's thread, but the blocking part of sandbox_requests.h's requests. `Pool` is what
// the API (pool_api.cpp) and the daemon call; the work is its pieces':
//   pool_images.h       the images it serves, admission (max, host memory), tenants' quotas
//   sandbox_table.h     the sandboxes it holds, and how the last ones that ended ended
//   sandbox_lifecycle.h each VMM's launch, ready line, end, stop and removal; refills
//   clone_resources.h   what each clone holds on the host (jail id, files, record, cgroup)
//   acquire_queue.h     acquires, served at once or waiting for a clone restored for them
//   leases.h            an acquired sandbox's time to live and idle timeout
//   health_monitor.h    health checks; a hung sandbox is lost, killed and replaced
//   sandbox_requests.h  exec, files, pause, resume and snapshot on threads of their own
//
// The daemon keeps a record of each sandbox in its state directory (state_records.h), so
// that a daemon started again adopts the VMMs that still run (recover()).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "vmm/io/event_loop.h"
#include "vmm/pool/acquire_queue.h"
#include "vmm/pool/clone_resources.h"
#include "vmm/pool/health_monitor.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/leases.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/pool_images.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_options.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_exec.h"
#include "vmm/pool/sandbox_files.h"
#include "vmm/pool/sandbox_lifecycle.h"
#include "vmm/pool/sandbox_requests.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/tenant.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {

class Pool {
 public:
  // `networks` makes the clones' networks where options.networks says (pool_networks.h);
  // without both, an image with a network device is refused.
  Pool(io::EventLoop& loop, StateDir state, ImageStore store, std::unique_ptr<VmmLauncher> launcher,
       PoolOptions options, std::shared_ptr<network::CloneNetworks> networks = nullptr);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  // shutdown().
  ~Pool();

  // The images and sandboxes a daemon that ended left in the state directory: live VMMs
  // that were ready or in use are adopted (their time to live goes on), the others are
  // stopped, dead ones reported lost and their files removed. Then refills.
  void recover();

  // Registers the store's image `spec.name` (its files checked: image_store.h), or changes
  // its limits.
  PoolResult<nlohmann::json> register_image(const ImageSpec& spec);
  nlohmann::json images_json() const;

  using Answer = PoolAnswer;
  // Every call that names a sandbox takes its caller: a sandbox acquired by another tenant
  // is kNotFound, exactly as an unknown id. The pool's own clones (ready, starting) are the
  // operator's to see.
  //
  // Hands over a ready clone to `caller` at once, or calls `answer` once a clone restored
  // for it serves (or none could be: kFull, kQuota, kUnavailable).
  void acquire(const Tenant& caller, const AcquireRequest& request, Answer answer);
  PoolResult<void> release(const Tenant& caller, const std::string& id);
  // Runs `call` in sandbox `id` on a thread of its own; `answer` runs on the loop's thread
  // with the outcome (at once when the pool refuses the request).
  void exec(const Tenant& caller, const std::string& id, ExecCall call, Answer answer);
  // Writes `file` to `guest_path` in sandbox `id`, or reads it, the same way.
  void write_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                  GuestFile file, std::move_only_function<void(PoolResult<void>)> answer);
  void read_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                 std::move_only_function<void(PoolResult<GuestFile>)> answer);
  // Stops or restarts an acquired sandbox's vCPUs through its VMM's API socket; the answer
  // is the sandbox as GET shows it. A paused sandbox keeps its lease; exec and files wait
  // for its resume (409), health checks skip it.
  void pause(const Tenant& caller, const std::string& id, Answer answer);
  void resume(const Tenant& caller, const std::string& id, Answer answer);
  // Writes the sandbox's snapshot into the image store as image `name` (which must not exist),
  // a warm image that PUT /images/NAME can register; a running sandbox is paused for it and
  // resumed after. It is staged in the store and renamed to NAME once whole: a snapshot that
  // failed leaves nothing. kFull past the store's limits. The operator's only (kForbidden to
  // its owner otherwise): the store and its images are the operator's.
  void snapshot(const Tenant& caller, const std::string& id, const std::string& name,
                Answer answer);
  // Replaces the egress policy of acquired sandbox `id`'s network with `egress`, combined
  // with its image's (caller_egress); the answer is the sandbox. kInvalid when it has no
  // network.
  PoolResult<nlohmann::json> set_network(const Tenant& caller, const std::string& id,
                                         const network::EgressPolicy& egress);
  // Forwards a host port to `guest_port` of acquired sandbox `id`'s guest:
  // {"host_port", "guest_port"}.
  PoolResult<nlohmann::json> forward_port(const Tenant& caller, const std::string& id,
                                          uint16_t guest_port);
  // Where the Host-routed proxy reaches acquired sandbox `id`'s guest (host_proxy.h): its
  // network's host-side address. Any tenant's sandbox: the proxy has no caller. kNotFound
  // for an id that is not in use, kInvalid without a network, kConflict while paused.
  PoolResult<std::string> proxy_address(const std::string& id) const;
  // Sets acquired sandbox `id`'s time to live to `ttl_s` seconds from now (0: none).
  PoolResult<void> set_time_to_live(const Tenant& caller, const std::string& id, uint64_t ttl_s);
  // Runs `work` against acquired sandbox `id`'s agent on a thread of its own, as exec does
  // (SandboxRequests::agent), for a front that speaks another API (vmm/e2b).
  void agent_request(const Tenant& caller, const std::string& id, SandboxRequests::AgentWork work,
                     std::move_only_function<void(PoolResult<void>)> done);
  // Renews an acquired sandbox's idle timeout; GET and exec do too.
  PoolResult<void> keepalive(const Tenant& caller, const std::string& id);
  PoolResult<nlohmann::json> sandbox_json(const Tenant& caller, const std::string& id);
  // The sandboxes `caller` may see.
  nlohmann::json sandboxes_json(const Tenant& caller) const;
  // Not const: each clone's network counters are read from the launcher.
  std::string metrics();
  const PoolCounters& counters() const { return counters_; }
  // How many sandboxes of `image` are in `state`.
  uint32_t count(const std::string& image, SandboxState state) const;

  // Stops every VMM (SIGTERM, SIGKILL after the grace period), waits for each, and removes
  // every file the pool made in its state directory. Blocking; the loop need not run.
  void shutdown();

 private:
  StateDir state_;
  ImageStore store_;
  PoolOptions options_;
  PoolCounters counters_;
  SandboxTable sandboxes_;
  PoolImages images_;
  CloneResources resources_;
  SandboxLifecycle lifecycle_;
  Leases leases_;
  AcquireQueue acquires_;
  HealthMonitor health_;
  SandboxRequests requests_;
};

}  // namespace dsec::pool

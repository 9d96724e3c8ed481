// The sandboxes the pool holds, each with what its supervision needs (its VMM's pidfd, its
// watches, its one timer, its lease's last request, the health check in flight), and how
// the last ones that ended ended, for a client that asks about one later. Who sees which:
// a sandbox acquired by another tenant is kNotFound, exactly as an unknown id; the pool's
// own clones (ready, starting) are the operator's to see.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "vmm/common/unique_fd.h"
#include "vmm/io/event_loop.h"
#include "vmm/pool/background_task.h"
#include "vmm/pool/health_check.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/tenant.h"

namespace dsec::pool {

struct Sandbox {
  using Clock = std::chrono::steady_clock;
  SandboxRecord record;
  UniqueFd pidfd;
  UniqueFd ready;  // until the ready line came
  std::optional<io::WatchId> exit_watch;
  std::optional<io::WatchId> ready_watch;
  std::optional<io::TimerId> timer;  // ready deadline, the lease, or SIGKILL
  Clock::time_point launched;
  Clock::time_point last_request;       // acquired: the last request that named it
  std::unique_ptr<HealthCheck> health;  // the check in flight
  // Its guest's resolv.conf being written, between its ready line and its being ready
  // (guest_resolver.h).
  std::unique_ptr<BackgroundTask> guest_sync;
  uint32_t agent_requests = 0;          // requests running in it (sandbox_requests.h)
  uint32_t failed_checks = 0;           // in a row
  std::string hung;        // how it stopped answering, until its log is read and it is killed
  uint32_t snapshots = 0;  // in flight (each pauses it): no health checks meanwhile
  std::optional<uint32_t> jail_id;  // its uid and gid, freed when it is removed
  // Stopped because it failed to start (it spoke no ready line, or none in time): its end
  // refills only after the back-off, as a VMM that ended while starting does.
  bool failed_to_start = false;
  // With a network: its namespace's veth address, which the host reaches the guest at.
  std::string network_address{};
};

// The wall clock in ms since the epoch, as a record's expires_at_ms counts it.
int64_t wall_ms_now();

class SandboxTable {
 public:
  using Map = std::map<std::string, std::unique_ptr<Sandbox>>;

  // The sandbox `id`; null when the pool holds none.
  Sandbox* find(const std::string& id) const;
  Sandbox& add(std::unique_ptr<Sandbox> sandbox);
  void erase(const std::string& id);
  const Map& all() const { return sandboxes_; }

  // How many sandboxes of `image` are in `state`.
  uint32_t count(const std::string& image, SandboxState state) const;
  // Those of `image` starting, ready or in use.
  uint32_t clones_of(const std::string& image) const;

  // Whether `caller` may see a sandbox held by `owner` (empty: none).
  static bool sees(const Tenant& caller, const std::string& owner);
  // The sandbox `id` when `caller` holds it.
  PoolResult<Sandbox*> in_use(const Tenant& caller, const std::string& id) const;
  // Why `caller` cannot reach sandbox `id`: gone, with how, or not found.
  PoolError gone(const Tenant& caller, const std::string& id) const;

  // Remembers why the sandbox of `record` ended (for the last 1024 that ended); add_to_end
  // adds `more` to what a client asking about sandbox `id` learns.
  void remember_end(const SandboxRecord& record, std::string why);
  void add_to_end(const std::string& id, const std::string& more);

  // The sandbox as GET /sandboxes/ID shows it, and those `caller` may see.
  static nlohmann::json view(const Sandbox& sandbox);
  nlohmann::json list_json(const Tenant& caller) const;

 private:
  // How a sandbox that is gone ended.
  struct Ended {
    std::string id;
    std::string owner;  // the tenant that held it; empty: none
    std::string why;
  };

  Map sandboxes_;
  std::deque<Ended> ended_;
};

}  // namespace dsec::pool

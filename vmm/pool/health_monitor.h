// Every health interval, each ready and acquired sandbox is asked whether it still serves
// (health_check.h); one that fails `health_failures` checks in a row is hung: it is
// reported lost, killed, and replaced (SandboxLifecycle::stop_hung). A paused sandbox, and
// one being snapshotted, owes no answer: it is skipped.
#pragma once

#include <optional>
#include <string>

#include "vmm/io/event_loop.h"
#include "vmm/pool/health_check.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_options.h"
#include "vmm/pool/sandbox_lifecycle.h"
#include "vmm/pool/sandbox_table.h"

namespace dsec::pool {

class HealthMonitor {
 public:
  // Starts checking, every options.health_interval (never when that is 0).
  HealthMonitor(io::EventLoop& loop, const PoolOptions& options, SandboxTable& sandboxes,
                SandboxLifecycle& lifecycle, PoolCounters& counters);
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;
  ~HealthMonitor();

  // No more checks start.
  void stop();

 private:
  void schedule();
  // Starts a check of every ready and acquired sandbox that has none in flight.
  void check_all();
  void on_verdict(const std::string& id, HealthVerdict verdict);

  io::EventLoop& loop_;
  const PoolOptions& options_;
  SandboxTable& sandboxes_;
  SandboxLifecycle& lifecycle_;
  PoolCounters& counters_;
  std::optional<io::TimerId> timer_;
};

}  // namespace dsec::pool

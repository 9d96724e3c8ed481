// The pool's counters and its restore-latency histogram, and their Prometheus text
// exposition (GET /metrics; format 0.0.4).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "vmm/network/clone_network.h"

namespace dsec::pool {

struct PoolCounters {
  uint64_t acquired = 0;
  uint64_t released = 0;
  uint64_t expired = 0;       // stopped at their time to live
  uint64_t idle_stopped = 0;  // stopped at their idle timeout: their client went away
  uint64_t lost = 0;          // VMMs that ended on their own after they served, or hung
  uint64_t hung = 0;          // of those, VMMs that stopped answering health checks
  uint64_t oom_killed = 0;    // of those, jailed VMMs killed by their cgroup's OOM killer
  uint64_t refill_errors = 0;
  uint64_t refused = 0;  // acquires answered 429
};

// Seconds from a VMM's launch to its "ready" line, in cumulative buckets.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBounds{0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
                                                  0.5,   1.0,  2.5,   5.0,  10.0, 30.0};
  void observe(std::chrono::nanoseconds latency);
  // `name`'s _bucket, _sum and _count lines.
  std::string text(const std::string& name) const;

 private:
  std::array<uint64_t, kBounds.size()> counts_{};  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_s_ = 0;
};

// One image's gauges.
struct ImageGauges {
  std::string image;
  uint32_t ready = 0;
  uint32_t in_use = 0;
  uint32_t starting = 0;
};

// One sandbox's network (docs/network.md): what crossed its veth pair each way, and what
// its egress filter refused.
struct SandboxNetworkCounters {
  std::string sandbox;
  std::string image;
  network::CloneNetworkCounters counters;
};

// dsec_pool_sandbox_network_{sent,received,dropped}_{bytes,packets}_total{sandbox,image}.
std::string network_metrics_text(const std::vector<SandboxNetworkCounters>& networks);

// `jailed`: whether the pool jails its clones (dsec_pool_jail_enabled: 0 under --no-jail).
std::string metrics_text(const PoolCounters& counters, const LatencyHistogram& restore_latency,
                         const std::vector<ImageGauges>& images, bool jailed);

}  // namespace dsec::pool

#include "vmm/pool/pool_metrics.h"

#include <fmt/format.h>

namespace dsec::pool {
namespace {

void counter(std::string& out, const char* name, const char* help, uint64_t value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, value);
}

void gauge(std::string& out, const char* name, const char* help,
           const std::vector<ImageGauges>& images, uint32_t ImageGauges::*field) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n", name, help);
  for (const auto& image : images) {
    // Image names are checked (letters, digits, '-', '_', '.'): nothing to escape.
    out += fmt::format("{}{{image=\"{}\"}} {}\n", name, image.image, image.*field);
  }
}

}  // namespace

void LatencyHistogram::observe(std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_s_ += seconds;
}

std::string LatencyHistogram::text(const std::string& name) const {
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  out += fmt::format("{0}_bucket{{le=\"+Inf\"}} {1}\n{0}_sum {2}\n{0}_count {1}\n", name, count_,
                     sum_s_);
  return out;
}

std::string metrics_text(const PoolCounters& counters, const LatencyHistogram& restore_latency,
                         const std::vector<ImageGauges>& images, bool jailed) {
  std::string out = fmt::format(
      "# HELP dsec_pool_jail_enabled Whether clones run jailed (0: the daemon runs with "
      "--no-jail, for debugging only)\n# TYPE dsec_pool_jail_enabled gauge\n"
      "dsec_pool_jail_enabled {}\n",
      jailed ? 1 : 0);
  gauge(out, "dsec_pool_sandboxes_ready", "Restored clones waiting to be acquired", images,
        &ImageGauges::ready);
  gauge(out, "dsec_pool_sandboxes_in_use", "Acquired sandboxes not released yet", images,
        &ImageGauges::in_use);
  gauge(out, "dsec_pool_sandboxes_starting", "Clones being restored", images,
        &ImageGauges::starting);
  counter(out, "dsec_pool_acquired_total", "Sandboxes handed out", counters.acquired);
  counter(out, "dsec_pool_released_total", "Sandboxes released by their clients",
          counters.released);
  counter(out, "dsec_pool_expired_total", "Sandboxes stopped at their time to live",
          counters.expired);
  counter(out, "dsec_pool_idle_stopped_total",
          "Sandboxes stopped at their idle timeout (no request named them: the client went away)",
          counters.idle_stopped);
  counter(out, "dsec_pool_lost_total",
          "Sandboxes lost after they served: their VMM ended on its own, or hung", counters.lost);
  counter(out, "dsec_pool_hung_total",
          "Sandboxes lost because they stopped answering health checks (their VMM was killed)",
          counters.hung);
  counter(out, "dsec_pool_oom_killed_total",
          "Sandboxes lost because their cgroup's OOM killer killed their VMM (memory.max)",
          counters.oom_killed);
  counter(out, "dsec_pool_refill_errors_total",
          "Clones that failed to start or ended before they served", counters.refill_errors);
  counter(out, "dsec_pool_refused_total", "Acquires refused with 429 (admission control)",
          counters.refused);
  out +=
      "# HELP dsec_pool_restore_seconds From a VMM's launch to its agent serving\n"
      "# TYPE dsec_pool_restore_seconds histogram\n";
  out += restore_latency.text("dsec_pool_restore_seconds");
  return out;
}

}  // namespace dsec::pool

namespace dsec::pool {

std::string network_metrics_text(const std::vector<SandboxNetworkCounters>& networks) {
  struct Series {
    const char* name;
    const char* help;
    uint64_t network::CloneNetworkCounters::*value;
  };
  static constexpr std::array<Series, 6> kSeries{{
      {"sent_bytes", "Bytes out of a sandbox's network namespace to the host's side.",
       &network::CloneNetworkCounters::sent_bytes},
      {"sent_packets", "Packets out of a sandbox's network namespace to the host's side.",
       &network::CloneNetworkCounters::sent_packets},
      {"received_bytes", "Bytes from the host's side into a sandbox's network namespace.",
       &network::CloneNetworkCounters::received_bytes},
      {"received_packets", "Packets from the host's side into a sandbox's network namespace.",
       &network::CloneNetworkCounters::received_packets},
      {"dropped_bytes", "Bytes of the guest's that its egress filter refused.",
       &network::CloneNetworkCounters::dropped_bytes},
      {"dropped_packets", "Packets of the guest's that its egress filter refused.",
       &network::CloneNetworkCounters::dropped_packets},
  }};
  std::string out;
  if (networks.empty()) {
    return out;
  }
  for (const auto& series : kSeries) {
    const std::string name = fmt::format("dsec_pool_sandbox_network_{}_total", series.name);
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, series.help, name);
    for (const auto& n : networks) {
      out += fmt::format("{}{{sandbox=\"{}\",image=\"{}\"}} {}\n", name, n.sandbox, n.image,
                         n.counters.*series.value);
    }
  }
  return out;
}

}  // namespace dsec::pool

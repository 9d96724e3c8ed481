#include "vmm/pool/health_monitor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/agent/protocol.h"

namespace dsec::pool {
namespace {

bool serving(const Sandbox& sandbox) {
  return sandbox.record.state == SandboxState::kReady ||
         sandbox.record.state == SandboxState::kInUse;
}

}  // namespace

HealthMonitor::HealthMonitor(io::EventLoop& loop, const PoolOptions& options,
                             SandboxTable& sandboxes, SandboxLifecycle& lifecycle,
                             PoolCounters& counters)
    : loop_(loop),
      options_(options),
      sandboxes_(sandboxes),
      lifecycle_(lifecycle),
      counters_(counters) {
  schedule();
}

HealthMonitor::~HealthMonitor() {
  stop();
}

void HealthMonitor::stop() {
  if (timer_) {
    (void)loop_.cancel_timer(*timer_);
    timer_.reset();
  }
}

void HealthMonitor::schedule() {
  if (options_.health_interval.count() <= 0) {
    return;
  }
  auto timer = loop_.add_timer(options_.health_interval, [this] {
    timer_.reset();
    check_all();
    schedule();
  });
  if (timer) {
    timer_ = *timer;
  } else {
    spdlog::error("pool: no timer for health checks: {}", timer.error().message());
  }
}

void HealthMonitor::check_all() {
  for (const auto& [id, s] : sandboxes_.all()) {
    if (!serving(*s) || s->health || s->record.paused || s->snapshots > 0) {
      continue;
    }
    s->health = HealthCheck::start(
        loop_, s->record.files.vsock, agent::kAgentPort, options_.health_timeout,
        [this, id](HealthVerdict verdict) { on_verdict(id, std::move(verdict)); });
  }
}

void HealthMonitor::on_verdict(const std::string& id, HealthVerdict verdict) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  // This runs inside the check's own callback: the check goes when this returns.
  const auto finished = std::move(s.health);
  if (verdict.health == Health::kAnswered) {
    s.failed_checks = 0;
    return;
  }
  if (s.record.paused || s.snapshots > 0) {
    s.failed_checks = 0;  // it was paused while the check ran: no answer was due
    return;
  }
  if (verdict.health == Health::kUnchecked) {
    spdlog::warn("pool: {}: could not check its health: {}", id, verdict.why);
    return;
  }
  if (!serving(s)) {
    return;  // stopped while the check was in flight
  }
  ++s.failed_checks;
  spdlog::warn("pool: {} failed a health check ({} of {} in a row): {}", id, s.failed_checks,
               options_.health_failures, verdict.why);
  if (s.failed_checks < options_.health_failures) {
    return;
  }
  ++counters_.lost;
  ++counters_.hung;
  lifecycle_.stop_hung(
      s, fmt::format("stopped answering ({} health checks in a row failed, the last: {})",
                     s.failed_checks, verdict.why));
}

}  // namespace dsec::pool

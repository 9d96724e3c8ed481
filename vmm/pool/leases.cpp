#include "vmm/pool/leases.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace dsec::pool {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Leases::Leases(SandboxLifecycle& lifecycle, CloneResources& resources, PoolCounters& counters)
    : lifecycle_(lifecycle), resources_(resources), counters_(counters) {}

PoolResult<void> Leases::grant(Sandbox& sandbox, const Tenant& caller,
                               const AcquireRequest& request, const ImageSpec& spec) {
  if (request.egress) {
    DSEC_TRY(resources_.set_egress(sandbox, *request.egress));
  }
  sandbox.record.state = SandboxState::kInUse;
  sandbox.record.owner = caller.name;
  const uint64_t ttl_s = request.ttl_s.value_or(spec.ttl_s);
  if (ttl_s > 0) {
    sandbox.record.expires_at_ms = wall_ms_now() + static_cast<int64_t>(ttl_s) * 1000;
  }
  sandbox.record.idle_timeout_ms = request.idle_timeout_s.value_or(spec.idle_timeout_s) * 1000;
  sandbox.last_request = Clock::now();
  arm(sandbox);
  ++counters_.acquired;
  resources_.persist(sandbox);
  return {};
}

void Leases::set_time_to_live(Sandbox& sandbox, uint64_t ttl_s) {
  sandbox.record.expires_at_ms = ttl_s > 0 ? wall_ms_now() + static_cast<int64_t>(ttl_s) * 1000 : 0;
  arm(sandbox);
  resources_.persist(sandbox);
}

void Leases::arm(Sandbox& sandbox) {
  lifecycle_.cancel_timer(sandbox);
  using std::chrono::nanoseconds;
  std::optional<nanoseconds> next;
  if (sandbox.record.expires_at_ms > 0) {
    next = std::chrono::milliseconds(sandbox.record.expires_at_ms - wall_ms_now());
  }
  if (sandbox.record.idle_timeout_ms > 0 && sandbox.agent_requests == 0) {
    const nanoseconds idle_end = sandbox.last_request +
                                 std::chrono::milliseconds(sandbox.record.idle_timeout_ms) -
                                 Clock::now();
    next = next ? std::min(*next, idle_end) : idle_end;
  }
  if (next) {
    lifecycle_.set_timer(sandbox, std::max(*next, nanoseconds{0}),
                         [this](Sandbox& leased) { on_end(leased); });
  }
}

// Requests renew the idle timeout without touching the timer: when it fires, it checks
// which end came, if any, and otherwise waits for the next.
void Leases::on_end(Sandbox& s) {
  const std::string& id = s.record.id;
  if (s.record.expires_at_ms > 0 && wall_ms_now() >= s.record.expires_at_ms) {
    ++counters_.expired;
    spdlog::info("pool: {} reached its time to live", id);
    lifecycle_.stop(s, "it reached its time to live");
    return;
  }
  const auto idle = std::chrono::milliseconds(s.record.idle_timeout_ms);
  if (idle.count() > 0 && s.agent_requests == 0 && Clock::now() - s.last_request >= idle) {
    ++counters_.idle_stopped;
    spdlog::info("pool: {}: no request for {} ms (its idle timeout): its client went away", id,
                 idle.count());
    lifecycle_.stop(s, "no request named it for " + std::to_string(idle.count()) +
                           " ms, its idle timeout (a client keeps it with GET, exec or POST "
                           "keepalive)");
    return;
  }
  arm(s);
}

}  // namespace dsec::pool

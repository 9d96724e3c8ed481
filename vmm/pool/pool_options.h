// The pool's settings (dsec-vmm pool's options, docs/pool.md), which each of its pieces
// reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "vmm/pool/jail_ids.h"
#include "vmm/pool/pool_networks.h"

namespace dsec::pool {

struct PoolOptions {
  // Refuse a new clone when the host's used memory plus the clone's guest memory would
  // pass this share of the host's memory.
  double max_memory_ratio = 0.9;
  // And refuse one when the guest memory of every clone not yet gone, plus the new one's,
  // would pass max_memory_ratio times this times the host's memory: 1 commits no more
  // guest memory than the host has, above 1 counts on clones not writing all of theirs.
  double memory_overcommit = 1.0;
  std::chrono::milliseconds ready_timeout{60'000};  // launch to the "ready" line
  std::chrono::milliseconds stop_grace{5'000};      // SIGTERM to SIGKILL
  std::chrono::milliseconds refill_backoff{1'000};  // after a clone failed to start
  // How often each ready and acquired sandbox is asked whether it serves (0: never), how
  // long it has to answer, and how many checks in a row it may fail before it is lost.
  std::chrono::milliseconds health_interval{10'000};
  std::chrono::milliseconds health_timeout{15'000};
  uint32_t health_failures = 2;
  // The uids and gids of jailed clones, one each; none: clones run unjailed (--no-jail).
  std::optional<JailIdRange> jail_ids = JailIdRange{};
  // Requests that run on a thread of their own (exec, copies, pause, resume, snapshot) at
  // once: one tenant's, and everyone's. One more is refused (kQuota, kFull), so that no
  // caller can make the daemon start threads without end.
  uint32_t max_requests_per_tenant = 16;
  uint32_t max_requests = 128;
  // Where clones' networks go (pool_networks.h); none: images with a network device are
  // refused. The pool makes them only when it is also given a CloneNetworks.
  std::optional<PoolNetworkOptions> networks = std::nullopt;
};

}  // namespace dsec::pool

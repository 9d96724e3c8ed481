// Acquires: one takes a ready clone of its image at once, else waits, in order of arrival,
// for the next clone of its image that serves, restoring one on the spot for each waiting
// acquire within the image's `max` and the host's memory (kFull otherwise); the loop serves
// other requests meanwhile. A waiting acquire gives up when three clones failed to start
// while it was first in line.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "vmm/pool/leases.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/pool_images.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_lifecycle.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/tenant.h"

namespace dsec::pool {

class AcquireQueue {
 public:
  AcquireQueue(SandboxTable& sandboxes, const PoolImages& images, SandboxLifecycle& lifecycle,
               Leases& leases, PoolCounters& counters);

  // Hands over a ready clone to `caller` at once, or calls `answer` once a clone restored
  // for it serves (or none could be: kFull, kQuota, kUnavailable).
  void acquire(const Tenant& caller, const AcquireRequest& request, PoolAnswer answer);
  // `sandbox` just became ready: the first waiter of its image gets it.
  void serve(Sandbox& sandbox);
  // A clone of `image` failed to start: the first waiter counts it, and gives up at three.
  void on_start_failed(const std::string& image);
  // The waiters go unanswered: the API stopped.
  void clear() { waiters_.clear(); }

 private:
  // An acquire waiting for a clone of its image to serve.
  struct Waiter {
    Tenant caller;
    AcquireRequest request;
    PoolAnswer answer;
    uint32_t failed_starts = 0;  // clones that failed to start while it was first in line
  };
  // Grants `sandbox` to `caller` and answers with it, or stops it and answers why not.
  void hand_over(Sandbox& sandbox, const Tenant& caller, const AcquireRequest& request,
                 const ImageSpec& spec, PoolAnswer answer);
  // Launches clones until every waiter of `image` has one starting; answers the waiters
  // the pool cannot start one for.
  void start_for_waiters(const std::string& image);
  // The images of the acquires `tenant` waits on.
  std::vector<std::string> waiting_for(const std::string& tenant) const;

  SandboxTable& sandboxes_;
  const PoolImages& images_;
  SandboxLifecycle& lifecycle_;
  Leases& leases_;
  PoolCounters& counters_;
  std::map<std::string, std::deque<Waiter>> waiters_;  // by image, first come first
};

}  // namespace dsec::pool

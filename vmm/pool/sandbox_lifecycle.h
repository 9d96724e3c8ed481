// A sandbox's life, from its VMM's launch to its removal. Each VMM is watched through its
// pidfd and its ready pipe (vmm_launcher.h), never by a thread of its own; its deadlines
// are the loop's timers, one per sandbox at a time (ready deadline, lease, SIGKILL, or a
// hung VMM's moment to log its state).
//
// A sandbox is starting (launched, its agent not serving yet), ready (restored, waiting to
// be acquired), in use (acquired), or stopping (SIGTERM sent, SIGKILL after a grace period,
// files removed once it ended). Ready clones are refilled in the background up to each
// image's `ready`, within its `max` and the host's memory (pool_images.h). A VMM that ends
// on its own is reported lost with its log's last lines; a hung one (health_monitor.h) is
// asked to log its vCPUs' state first, then killed.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "vmm/io/event_loop.h"
#include "vmm/pool/clone_resources.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/pool_images.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_options.h"
#include "vmm/pool/sandbox_table.h"

namespace dsec::pool {

// What the lifecycle tells the pool's acquires (acquire_queue.h).
struct LifecycleEvents {
  std::move_only_function<void(Sandbox&)> serving;  // a clone became ready
  std::move_only_function<void(const std::string& image)> start_failed;
};

class SandboxLifecycle {
 public:
  SandboxLifecycle(io::EventLoop& loop, const StateDir& state, const ImageStore& store,
                   const PoolOptions& options, SandboxTable& sandboxes, const PoolImages& images,
                   CloneResources& resources, PoolCounters& counters, LifecycleEvents events);
  SandboxLifecycle(const SandboxLifecycle&) = delete;
  SandboxLifecycle& operator=(const SandboxLifecycle&) = delete;

  // Starts a clone of `image`, if admitted (kFull otherwise).
  PoolResult<Sandbox*> launch(const PoolImage& image);
  // Launches clones until each image has its `ready` ones, ready or starting.
  void refill();
  // The same, on the loop's next turn: after the request being served has its answer
  // written, which a launch (tens of ms) would otherwise hold up.
  void refill_soon() { schedule_refill(std::chrono::milliseconds(0)); }
  // The VMM of sandbox `id` ended (its pidfd is readable): reports how, removes it, refills.
  void on_exit(const std::string& id);
  // SIGTERM, and SIGKILL after the grace period; `why` is what a client asking learns.
  void stop(Sandbox& sandbox, std::string why);
  // A sandbox that stopped answering (`how`): it logs its state (SIGUSR1), then SIGKILL.
  void stop_hung(Sandbox& sandbox, std::string how);
  // Watches the live VMM a daemon that ended left (recovery): a ready or acquired sandbox
  // of a registered image is kept and returned, any other stopped (null).
  Sandbox* adopt(SandboxRecord record, UniqueFd pidfd);

  // Sets the sandbox's one timer, replacing the one before; `on_fire` runs only if the
  // sandbox is still there.
  void set_timer(Sandbox& sandbox, std::chrono::nanoseconds delay,
                 std::move_only_function<void(Sandbox&)> on_fire);
  void cancel_timer(Sandbox& sandbox);

  // Blocking, at shutdown: stops every VMM (SIGTERM, SIGKILL after the grace period) and
  // waits for each; then remove_all() reaps them and removes their files.
  void stop_all();
  void remove_all();

  const LatencyHistogram& restore_latency() const { return restore_latency_; }

 private:
  // The ready pipe became readable.
  void on_ready_readable(const std::string& id);
  // Writes its guest's resolv.conf (its egress names a resolver), then becomes ready; a
  // failure stops it as one that failed to start.
  void sync_guest(Sandbox& sandbox);
  void become_ready(Sandbox& sandbox);
  // Closes the ready pipe and its watch.
  void stop_watching_ready(Sandbox& sandbox);
  void on_ready_deadline(Sandbox& sandbox);
  // What stop and stop_hung share: the sandbox is stopping, for `why`, and its timer free.
  void mark_stopping(Sandbox& sandbox, std::string why);
  // A hung sandbox's log, once it logged its state or ended.
  void report_hung(Sandbox& sandbox);
  void remove(const std::string& id);
  void schedule_refill(std::chrono::milliseconds delay);

  io::EventLoop& loop_;
  const StateDir& state_;
  const ImageStore& store_;
  const PoolOptions& options_;
  SandboxTable& sandboxes_;
  const PoolImages& images_;
  CloneResources& resources_;
  PoolCounters& counters_;
  LifecycleEvents events_;
  LatencyHistogram restore_latency_;
  std::optional<io::TimerId> refill_timer_;
};

}  // namespace dsec::pool

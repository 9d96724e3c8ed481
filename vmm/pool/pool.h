// The sandbox pool: warm images and their limits, and one VMM process per sandbox,
// supervised on one event loop (the daemon's: its API thread's). Each VMM is watched
// through its pidfd and its ready pipe (vmm_launcher.h), never by a thread of its own;
// time limits are the loop's timers. Everything here runs on the loop's thread.
//
// A sandbox is starting (launched, its agent not serving yet), ready (restored, waiting
// to be acquired), in use (acquired), or stopping (SIGTERM sent, SIGKILL after a grace
// period, files removed once it ended). Ready clones are refilled in the background up to
// each image's `ready`; an acquire takes a ready one, else waits, in order of arrival, for
// the next clone of its image that serves, restoring one on the spot for each waiting
// acquire within the image's `max` and the host memory ratio (429 otherwise); the loop
// serves other requests meanwhile. A VMM that ends on its own is reported lost with its log's last
// lines. Every health interval, each ready and acquired sandbox is asked whether it still serves
// (health_check.h); one that fails `health_failures` checks in a row is hung: it is
// reported lost, killed, and replaced.
// An acquired sandbox holds a lease: its time to live, and its idle timeout, which every
// request that names it (GET, exec, keepalive) renews; a client that went away stops
// renewing, and the sandbox is stopped. An exec runs on a thread of its own
// (background_task.h) while the loop serves other requests; the idle timeout waits while
// one runs.
//
// The daemon keeps a record of each sandbox in its state directory (state_records.h), so
// that a daemon started again adopts the VMMs that still run (recover()).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "vmm/common/unique_fd.h"
#include "vmm/io/event_loop.h"
#include "vmm/pool/background_task.h"
#include "vmm/pool/health_check.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/jail_ids.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/pool_images.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_options.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_exec.h"
#include "vmm/pool/sandbox_files.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/tenant.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {

class Pool {
 public:
  Pool(io::EventLoop& loop, StateDir state, ImageStore store, std::unique_ptr<VmmLauncher> launcher,
       PoolOptions options);
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
  // Renews an acquired sandbox's idle timeout; GET and exec do too.
  PoolResult<void> keepalive(const Tenant& caller, const std::string& id);
  PoolResult<nlohmann::json> sandbox_json(const Tenant& caller, const std::string& id);
  // The sandboxes `caller` may see.
  nlohmann::json sandboxes_json(const Tenant& caller) const;
  std::string metrics() const;
  const PoolCounters& counters() const { return counters_; }
  // How many sandboxes of `image` are in `state`.
  uint32_t count(const std::string& image, SandboxState state) const;

  // Stops every VMM (SIGTERM, SIGKILL after the grace period), waits for each, and removes
  // every file the pool made in its state directory. Blocking; the loop need not run.
  void shutdown();

 private:
  using Clock = std::chrono::steady_clock;

  PoolResult<Sandbox*> launch(const PoolImage& image);
  // The ready pipe became readable.
  void on_ready_readable(const std::string& id);
  // Closes the ready pipe and its watch.
  void stop_watching_ready(Sandbox& sandbox);
  // The VMM's pidfd became readable: it ended.
  void on_exit(const std::string& id);
  // An acquire waiting for a clone of its image to serve.
  struct Waiter {
    Tenant caller;
    AcquireRequest request;
    Answer answer;
    uint32_t failed_starts = 0;  // clones that failed to start while it was first in line
  };
  // Launches clones until every waiter of `image` has one starting; answers the waiters
  // the pool cannot start one for.
  void start_for_waiters(const std::string& image);
  // `sandbox` just became ready: the first waiter of its image gets it.
  void serve_waiter(Sandbox& sandbox);
  // A clone of `image` failed to start: the first waiter counts it, and gives up at three.
  void on_start_failed(const std::string& image);
  void hand_over(Sandbox& sandbox, const Tenant& caller, const AcquireRequest& request,
                 const PoolImage& image);
  // The images of the acquires `tenant` waits on.
  std::vector<std::string> waiting_for(const std::string& tenant) const;
  void stop(Sandbox& sandbox, std::string why);
  void remove(const std::string& id);
  void refill();
  void schedule_refill(std::chrono::milliseconds delay);
  // Asks the launcher to remove what it left every half second until it did.
  void schedule_cleanup();
  void persist(const Sandbox& sandbox);
  void set_timer(Sandbox& sandbox, std::chrono::nanoseconds delay,
                 void (Pool::*on_fire)(const std::string&));
  void cancel_timer(Sandbox& sandbox);
  void on_ready_deadline(const std::string& id);
  // Arms the timer for the lease's next end: its time to live or its idle timeout.
  void arm_lease(Sandbox& sandbox);
  void on_lease_end(const std::string& id);
  void on_kill_deadline(const std::string& id);
  // A hung sandbox: its log is read (with the state SIGUSR1 made its VMM log), then SIGKILL.
  void on_hung_state_logged(const std::string& id);
  void report_hung(Sandbox& sandbox);
  // Starts a check of every ready and acquired sandbox that has none in flight.
  void check_health();
  void schedule_health_checks();
  void on_health(const std::string& id, HealthVerdict verdict);
  // A blocking request to sandbox `id`'s agent or VMM (given its sockets), run on a thread
  // of its own; `done` runs on the loop's thread after it, with whether the sandbox is
  // still in use (else why it is gone), or at once with why the pool refuses the request:
  // also when the sandbox is paused and the request `needs` its guest running.
  // `work` says whether the request succeeded.
  enum class Needs { kRunningGuest, kVmmOnly };
  using AgentWork = std::move_only_function<bool(const SandboxFiles& sockets)>;
  using AgentDone = std::move_only_function<void(PoolResult<void> still_in_use)>;
  void run_agent_request(const Tenant& caller, const std::string& id, AgentWork work,
                         AgentDone done, Needs needs = Needs::kRunningGuest);
  void set_paused(const Tenant& caller, const std::string& id, bool paused, Answer answer);
  // The sandbox `id` when `caller` holds it and its VMM has an API socket.
  PoolResult<Sandbox*> with_api(const Tenant& caller, const std::string& id);
  // Whether `caller` may start one more request on a thread of its own (kQuota, kFull).
  PoolResult<void> check_request_room(const Tenant& caller) const;
  PoolResult<void> end_agent_request(const Tenant& caller, const std::string& id);
  PoolError agent_failure(const std::string& id, const std::string& what, const Error& e,
                          const PoolResult<void>& still_in_use) const;
  void adopt(SandboxRecord record, UniqueFd pidfd);

  io::EventLoop& loop_;
  StateDir state_;
  ImageStore store_;
  std::unique_ptr<VmmLauncher> launcher_;
  PoolOptions options_;
  std::optional<JailIds> jail_ids_;  // none: --no-jail
  SandboxTable sandboxes_;
  PoolImages images_;
  PoolCounters counters_;
  LatencyHistogram restore_latency_;
  std::optional<io::TimerId> refill_timer_;
  std::optional<io::TimerId> health_timer_;
  std::optional<io::TimerId> cleanup_timer_;  // what the launcher left to remove (forget())
  // Running agent requests, by a key of their own, and how many each tenant runs.
  std::map<uint64_t, std::unique_ptr<BackgroundTask>> agent_requests_;
  std::map<std::string, uint32_t> requests_by_tenant_;
  std::map<std::string, std::deque<Waiter>> waiters_;  // by image, first come first
  uint64_t next_request_ = 1;
};

}  // namespace dsec::pool

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
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_exec.h"
#include "vmm/pool/sandbox_files.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/tenant.h"
#include "vmm/pool/vmm_launcher.h"

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
};

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

  using Answer = std::move_only_function<void(PoolResult<nlohmann::json>)>;
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
  struct Image {
    ImageSpec spec;
    uint64_t guest_bytes = 0;  // the snapshot's memory file's size
  };
  struct Sandbox {
    SandboxRecord record;
    UniqueFd pidfd;
    UniqueFd ready;  // until the ready line came
    std::optional<io::WatchId> exit_watch;
    std::optional<io::WatchId> ready_watch;
    std::optional<io::TimerId> timer;  // ready deadline, the lease, or SIGKILL
    Clock::time_point launched;
    Clock::time_point last_request;       // acquired: the last request that named it
    std::unique_ptr<HealthCheck> health;  // the check in flight
    uint32_t agent_requests = 0;          // execs and copies running
    uint32_t failed_checks = 0;           // in a row
    std::string hung;        // how it stopped answering, until its log is read and it is killed
    uint32_t snapshots = 0;  // in flight (each pauses it): no health checks meanwhile
    std::optional<uint32_t> jail_id;  // its uid and gid, freed when it is removed
  };
  // How a sandbox that is gone ended, for the client that asks about it later.
  struct Ended {
    std::string id;
    std::string owner;  // the tenant that held it; empty: none
    std::string why;
  };

  // register_image without saving images.json or refilling: recover()'s.
  PoolResult<nlohmann::json> add_image(const ImageSpec& spec);
  PoolResult<Sandbox*> launch(const Image& image);
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
                 const Image& image);
  // Whether `caller`'s quotas leave room for one more sandbox of `image` (kQuota if not).
  PoolResult<void> check_quota(const Tenant& caller, const Image& image) const;
  // Whether `caller` may see a sandbox held by `owner` (empty: none).
  static bool sees(const Tenant& caller, const std::string& owner);
  void stop(Sandbox& sandbox, std::string why);
  void remove(const std::string& id);
  void refill();
  void schedule_refill(std::chrono::milliseconds delay);
  // Asks the launcher to remove what it left every half second until it did.
  void schedule_cleanup();
  PoolResult<void> admit(const Image& image) const;
  // The guest memory of every sandbox the pool holds (starting, ready, in use, stopping).
  uint64_t committed_guest_bytes() const;
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
  void remember_end(const SandboxRecord& record, std::string why);
  // The sandbox `id` when `caller` holds it.
  PoolResult<Sandbox*> in_use(const Tenant& caller, const std::string& id);
  // Why `caller` cannot reach sandbox `id`: gone, with how, or not found.
  PoolError gone(const Tenant& caller, const std::string& id) const;
  nlohmann::json sandbox_view(const Sandbox& sandbox) const;
  uint32_t clones_of(const std::string& image) const;
  void adopt(SandboxRecord record, UniqueFd pidfd);

  io::EventLoop& loop_;
  StateDir state_;
  ImageStore store_;
  std::unique_ptr<VmmLauncher> launcher_;
  PoolOptions options_;
  std::optional<JailIds> jail_ids_;  // none: --no-jail
  std::map<std::string, Image> images_;
  std::map<std::string, std::unique_ptr<Sandbox>> sandboxes_;
  std::deque<Ended> ended_;  // the last kMaxEnded
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

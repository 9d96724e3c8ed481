#include "vmm/pool/pool.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <thread>

#include "vmm/agent/protocol.h"
#include "vmm/jail/supervisor.h"
#include "vmm/pool/log_tail.h"
#include "vmm/pool/sandbox_dir.h"
#include "vmm/pool/sandbox_exec.h"
#include "vmm/pool/sandbox_files.h"

namespace dsec::pool {
namespace {

// How long a hung VMM has to log its vCPUs' state (SIGUSR1) before SIGKILL.
constexpr std::chrono::milliseconds kHungStateWait{500};

std::string new_sandbox_id() {
  std::array<uint8_t, 8> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    // getrandom on 8 bytes does not fail once the pool is initialized; the pid and the
    // clock keep ids distinct if it ever does.
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    return fmt::format("sb-{:x}-{:x}", ::getpid(), now);
  }
  std::string id = "sb-";
  for (const uint8_t b : bytes) {
    id += fmt::format("{:02x}", b);
  }
  return id;
}

void remove_files(const SandboxFiles& files) {
  ::unlink(files.vsock.c_str());
  ::unlink(files.log.c_str());
  if (!files.api.empty()) {
    ::unlink(files.api.c_str());
  }
}

}  // namespace

Pool::Pool(io::EventLoop& loop, StateDir state, ImageStore store,
           std::unique_ptr<VmmLauncher> launcher, PoolOptions options)
    : loop_(loop),
      state_(std::move(state)),
      store_(std::move(store)),
      launcher_(std::move(launcher)),
      options_(options),
      images_(store_, state_, sandboxes_, options_) {
  if (options_.jail_ids) {
    jail_ids_.emplace(*options_.jail_ids);
  }
  schedule_health_checks();
}

Pool::~Pool() {
  shutdown();
}

PoolResult<nlohmann::json> Pool::register_image(const ImageSpec& spec) {
  auto added = DSEC_TRY(images_.add(spec));
  images_.save();
  refill();
  return added;
}

nlohmann::json Pool::images_json() const {
  return images_.images_json();
}

uint32_t Pool::count(const std::string& image, SandboxState state) const {
  return sandboxes_.count(image, state);
}

PoolResult<Sandbox*> Pool::launch(const PoolImage& image) {
  DSEC_TRY(images_.admit(image));
  // Checked again: the files may have changed since the image was registered. The clone
  // inherits these descriptors and opens nothing of the store by name.
  auto image_files = store_.open_image(image.spec.name);
  if (!image_files) {
    ++counters_.refill_errors;
    return std::unexpected(
        error(Failure::kUnavailable,
              "cannot start a clone of " + image.spec.name + ": " + image_files.error().message()));
  }
  const std::string id = new_sandbox_id();
  CloneLaunch clone{.state_fd = image_files->state.get(),
                    .memory_fd = image_files->memory.get(),
                    .guest_bytes = image_files->memory_bytes,
                    .dir = state_.sandbox_dir(id),
                    .files = state_.files_for(id),
                    .jail_id = std::nullopt};
  if (jail_ids_) {
    auto jail_id = jail_ids_->allocate();
    if (!jail_id) {
      return std::unexpected(error(Failure::kFull, jail_id.error().message()));
    }
    clone.jail_id = *jail_id;
  }
  auto launched = [&]() -> Result<LaunchedVmm> {
    DSEC_TRY(make_sandbox_dir(clone.dir));
    return launcher_->launch(clone);
  }();
  if (!launched) {
    ++counters_.refill_errors;
    ::unlink(clone.files.log.c_str());
    remove_sandbox_dir(clone.dir);
    if (clone.jail_id && jail_ids_) {
      jail_ids_->release(*clone.jail_id);
    }
    return std::unexpected(
        error(Failure::kUnavailable,
              "cannot start a clone of " + image.spec.name + ": " + launched.error().message()));
  }
  const SandboxFiles& files = clone.files;
  auto sandbox = std::make_unique<Sandbox>();
  sandbox->record = SandboxRecord{.id = id,
                                  .image = image.spec.name,
                                  .process = launched->identity,
                                  .files = files,
                                  .state = SandboxState::kStarting,
                                  .expires_at_ms = 0};
  sandbox->pidfd = std::move(launched->pidfd);
  sandbox->ready = std::move(launched->ready);
  sandbox->launched = Clock::now();
  sandbox->jail_id = clone.jail_id;
  Sandbox& s = *sandbox;
  sandboxes_.add(std::move(sandbox));
  persist(s);
  auto exit_watch = loop_.add_fd_watch(s.pidfd.get(), [this, id] { on_exit(id); });
  auto ready_watch = loop_.add_fd_watch(s.ready.get(), [this, id] { on_ready_readable(id); });
  if (!exit_watch || !ready_watch) {
    // Without its watches the pool could not tell when it serves or ends: stop it now.
    if (exit_watch) {
      (void)loop_.remove_watch(*exit_watch);
    }
    if (ready_watch) {
      (void)loop_.remove_watch(*ready_watch);
    }
    (void)signal_pidfd(s.pidfd.get(), SIGKILL);
    (void)launcher_->reap(s.pidfd.get(), s.record.process.pid);
    ++counters_.refill_errors;
    remove(id);
    return std::unexpected(
        error(Failure::kUnavailable, "cannot watch a new clone on the event loop"));
  }
  s.exit_watch = *exit_watch;
  s.ready_watch = *ready_watch;
  set_timer(s, options_.ready_timeout, &Pool::on_ready_deadline);
  spdlog::info("pool: {} started for image {} (pid {})", id, image.spec.name, s.record.process.pid);
  return &s;
}

void Pool::on_ready_readable(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr || !found->ready) {
    return;
  }
  Sandbox& s = *found;
  std::array<char, 64> buffer{};
  const ssize_t n = ::read(s.ready.get(), buffer.data(), buffer.size());
  if (n > 0 && std::string_view(buffer.data(), static_cast<size_t>(n)).starts_with("ready\n")) {
    stop_watching_ready(s);
    cancel_timer(s);
    restore_latency_.observe(Clock::now() - s.launched);
    s.record.state = SandboxState::kReady;
    persist(s);
    spdlog::info("pool: {} ready", id);
    serve_waiter(s);
    refill();
    return;
  }
  if (n < 0 && errno == EINTR) {
    return;
  }
  stop_watching_ready(s);
  // End of file: the VMM closed the pipe, most likely as it ended; its pidfd tells how,
  // and the ready deadline stops one that lives on without serving. Anything but the ready
  // line is a VMM that does not speak the protocol.
  if (n > 0) {
    ++counters_.refill_errors;
    const std::string image = s.record.image;
    stop(s, "its VMM wrote something other than the ready line");
    on_start_failed(image);
  }
}

void Pool::stop_watching_ready(Sandbox& sandbox) {
  if (sandbox.ready_watch) {
    (void)loop_.remove_watch(*sandbox.ready_watch);
    sandbox.ready_watch.reset();
  }
  sandbox.ready.reset();
}

void Pool::on_exit(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  const ProcessEnd end = launcher_->reap(s.pidfd.get(), s.record.process.pid);
  std::string how = end.how;
  if (s.jail_id && end.exit_status == jail::kExitOomKilled) {
    ++counters_.oom_killed;
    how =
        "was killed by its cgroup's OOM killer: it used more than its memory.max, the "
        "guest's RAM and the VMM's overhead (exit status 5)";
  }
  const std::string tail = log_tail(s.record.files.log);
  switch (s.record.state) {
    case SandboxState::kStopping:
      spdlog::info("pool: {} stopped ({})", id, how);
      report_hung(s);  // when it ended before its state was logged
      break;
    case SandboxState::kStarting: {
      ++counters_.refill_errors;
      sandboxes_.remember_end(s.record,
                              "its VMM " + how + " before it served; its log ended:\n" + tail);
      spdlog::warn("pool: {} failed to start: its VMM {}; its log ended:\n{}", id, how, tail);
      // Not at once: a clone that cannot start would be retried in a tight loop. A waiting
      // acquire tries three at most.
      const std::string image = s.record.image;
      remove(id);
      schedule_refill(options_.refill_backoff);
      on_start_failed(image);
      return;
    }
    case SandboxState::kReady:
    case SandboxState::kInUse:
      ++counters_.lost;
      sandboxes_.remember_end(s.record,
                              "the sandbox was lost: its VMM " + how + "; its log ended:\n" + tail);
      spdlog::warn("pool: {} lost: its VMM {}; its log ended:\n{}", id, how, tail);
      break;
  }
  remove(id);
  refill();
}

void Pool::acquire(const Tenant& caller, const AcquireRequest& request, Answer answer) {
  const PoolImage* image = images_.find(request.image);
  if (image == nullptr) {
    answer(std::unexpected(
        error(Failure::kNotFound, "no image '" + request.image +
                                      "' is registered: PUT /images/NAME with its "
                                      "snapshot_dir first (GET /images lists them)")));
    return;
  }
  if (auto room = images_.check_quota(caller, *image, waiting_for(caller.name)); !room) {
    ++counters_.refused;
    answer(std::unexpected(room.error()));
    return;
  }
  auto& waiting = waiters_[request.image];
  if (waiting.empty()) {
    for (const auto& [id, s] : sandboxes_.all()) {
      if (s->record.image == request.image && s->record.state == SandboxState::kReady) {
        hand_over(*s, caller, request, *image);
        answer(SandboxTable::view(*s));
        refill();
        return;
      }
    }
  }
  waiting.push_back(Waiter{
      .caller = caller, .request = request, .answer = std::move(answer), .failed_starts = 0});
  start_for_waiters(request.image);
}

void Pool::start_for_waiters(const std::string& image_name) {
  auto& waiting = waiters_[image_name];
  const PoolImage* image = images_.find(image_name);
  while (!waiting.empty() && count(image_name, SandboxState::kStarting) < waiting.size()) {
    auto launched =
        image == nullptr
            ? PoolResult<Sandbox*>(std::unexpected(
                  error(Failure::kNotFound, "image " + image_name + " is no longer registered")))
            : launch(*image);
    if (launched) {
      continue;
    }
    // The newest waiter hears why; those before it have their clones starting.
    if (launched.error().kind == Failure::kFull) {
      ++counters_.refused;
    }
    auto refused = std::move(waiting.back());
    waiting.pop_back();
    refused.answer(std::unexpected(launched.error()));
  }
}

void Pool::serve_waiter(Sandbox& sandbox) {
  auto& waiting = waiters_[sandbox.record.image];
  const PoolImage* image = images_.find(sandbox.record.image);
  if (waiting.empty() || image == nullptr) {
    return;
  }
  auto waiter = std::move(waiting.front());
  waiting.pop_front();
  hand_over(sandbox, waiter.caller, waiter.request, *image);
  waiter.answer(SandboxTable::view(sandbox));
}

void Pool::on_start_failed(const std::string& image) {
  auto& waiting = waiters_[image];
  if (waiting.empty()) {
    return;
  }
  if (++waiting.front().failed_starts >= 3) {
    auto failed = std::move(waiting.front());
    waiting.pop_front();
    failed.answer(std::unexpected(
        error(Failure::kUnavailable, "no clone of " + image +
                                         " came up (3 failed to start): GET /metrics "
                                         "counts refill errors, the daemon's log says "
                                         "why")));
  }
  start_for_waiters(image);
}

std::vector<std::string> Pool::waiting_for(const std::string& tenant) const {
  std::vector<std::string> images;
  for (const auto& [image, waiting] : waiters_) {
    for (const auto& waiter : waiting) {
      if (waiter.caller.name == tenant) {
        images.push_back(image);
      }
    }
  }
  return images;
}

void Pool::hand_over(Sandbox& sandbox, const Tenant& caller, const AcquireRequest& request,
                     const PoolImage& image) {
  sandbox.record.state = SandboxState::kInUse;
  sandbox.record.owner = caller.name;
  const uint64_t ttl_s = request.ttl_s.value_or(image.spec.ttl_s);
  if (ttl_s > 0) {
    sandbox.record.expires_at_ms = wall_ms_now() + static_cast<int64_t>(ttl_s) * 1000;
  }
  sandbox.record.idle_timeout_ms =
      request.idle_timeout_s.value_or(image.spec.idle_timeout_s) * 1000;
  sandbox.last_request = Clock::now();
  arm_lease(sandbox);
  ++counters_.acquired;
  persist(sandbox);
}

PoolResult<void> Pool::release(const Tenant& caller, const std::string& id) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  ++counters_.released;
  stop(*s, "it was released");
  return {};
}

PoolResult<void> Pool::keepalive(const Tenant& caller, const std::string& id) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  s->last_request = Clock::now();
  return {};
}

PoolResult<nlohmann::json> Pool::sandbox_json(const Tenant& caller, const std::string& id) {
  Sandbox* s = sandboxes_.find(id);
  if (s == nullptr || !SandboxTable::sees(caller, s->record.owner)) {
    return std::unexpected(sandboxes_.gone(caller, id));
  }
  s->last_request = Clock::now();
  return SandboxTable::view(*s);
}

nlohmann::json Pool::sandboxes_json(const Tenant& caller) const {
  return sandboxes_.list_json(caller);
}

std::string Pool::metrics() const {
  return metrics_text(counters_, restore_latency_, images_.gauges(), jail_ids_.has_value()) +
         fmt::format(
             "# HELP dsec_pool_guest_memory_committed_bytes Guest memory of every sandbox the "
             "pool holds, what admission counts against --memory-overcommit.\n"
             "# TYPE dsec_pool_guest_memory_committed_bytes gauge\n"
             "dsec_pool_guest_memory_committed_bytes {}\n",
             images_.committed_guest_bytes());
}

void Pool::stop(Sandbox& sandbox, std::string why) {
  sandboxes_.remember_end(sandbox.record, std::move(why));
  cancel_timer(sandbox);
  stop_watching_ready(sandbox);
  sandbox.record.state = SandboxState::kStopping;
  persist(sandbox);
  if (auto sent = signal_pidfd(sandbox.pidfd.get(), SIGTERM); !sent) {
    spdlog::warn("pool: {}: {}", sandbox.record.id, sent.error().message());
  }
  set_timer(sandbox, options_.stop_grace, &Pool::on_kill_deadline);
}

void Pool::on_kill_deadline(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  s.timer.reset();
  spdlog::warn("pool: {} did not stop within {} ms of SIGTERM: SIGKILL", id,
               options_.stop_grace.count());
  // The leader still lives (its pidfd has not fired), so its process group is still its.
  ::killpg(s.record.process.pid, SIGKILL);
  (void)signal_pidfd(s.pidfd.get(), SIGKILL);
}

void Pool::schedule_health_checks() {
  if (options_.health_interval.count() <= 0) {
    return;
  }
  auto timer = loop_.add_timer(options_.health_interval, [this] {
    health_timer_.reset();
    check_health();
    schedule_health_checks();
  });
  if (timer) {
    health_timer_ = *timer;
  } else {
    spdlog::error("pool: no timer for health checks: {}", timer.error().message());
  }
}

void Pool::check_health() {
  for (const auto& [id, s] : sandboxes_.all()) {
    const bool serving =
        s->record.state == SandboxState::kReady || s->record.state == SandboxState::kInUse;
    if (!serving || s->health || s->record.paused || s->snapshots > 0) {
      continue;
    }
    s->health = HealthCheck::start(
        loop_, s->record.files.vsock, agent::kAgentPort, options_.health_timeout,
        [this, id](HealthVerdict verdict) { on_health(id, std::move(verdict)); });
  }
}

void Pool::on_health(const std::string& id, HealthVerdict verdict) {
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
  const bool serving =
      s.record.state == SandboxState::kReady || s.record.state == SandboxState::kInUse;
  if (!serving) {
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
  s.hung = fmt::format("stopped answering ({} health checks in a row failed, the last: {})",
                       s.failed_checks, verdict.why);
  sandboxes_.remember_end(s.record, "the sandbox was lost: its VMM " + s.hung);
  cancel_timer(s);
  stop_watching_ready(s);
  s.record.state = SandboxState::kStopping;
  persist(s);
  // Before SIGKILL, SIGUSR1: a VMM whose signal thread still runs logs where its vCPUs and
  // devices stand, which tells a stalled guest from a stuck VMM. Its log is read, and the
  // VMM killed, when that had a moment to come or when the VMM ended, whichever is first.
  (void)signal_pidfd(s.pidfd.get(), SIGUSR1);
  set_timer(s, kHungStateWait, &Pool::on_hung_state_logged);
}

void Pool::on_hung_state_logged(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  s.timer.reset();
  report_hung(s);
  // Hung: SIGTERM may go unheard. Its end (the pidfd) removes it and refills.
  ::killpg(s.record.process.pid, SIGKILL);
  (void)signal_pidfd(s.pidfd.get(), SIGKILL);
}

void Pool::report_hung(Sandbox& s) {
  if (s.hung.empty()) {
    return;
  }
  const std::string tail = log_tail(s.record.files.log);
  spdlog::warn("pool: {} lost: its VMM {}; its log ended:\n{}", s.record.id, s.hung, tail);
  // The client that asks now learns what the log says too.
  sandboxes_.add_to_end(s.record.id, "; its log ended:\n" + tail);
  s.hung.clear();
}

void Pool::on_ready_deadline(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  found->timer.reset();
  ++counters_.refill_errors;
  spdlog::warn("pool: {} did not serve within {} ms; stopping it", id,
               options_.ready_timeout.count());
  const std::string image = found->record.image;
  stop(*found, "it did not serve within the ready timeout");
  schedule_refill(options_.refill_backoff);
  on_start_failed(image);
}

void Pool::arm_lease(Sandbox& sandbox) {
  cancel_timer(sandbox);
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
    set_timer(sandbox, std::max(*next, nanoseconds{0}), &Pool::on_lease_end);
  }
}

// Requests renew the idle timeout without touching the timer: when it fires, it checks
// which end came, if any, and otherwise waits for the next.
void Pool::on_lease_end(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  s.timer.reset();
  if (s.record.expires_at_ms > 0 && wall_ms_now() >= s.record.expires_at_ms) {
    ++counters_.expired;
    spdlog::info("pool: {} reached its time to live", id);
    stop(s, "it reached its time to live");
    return;
  }
  const auto idle = std::chrono::milliseconds(s.record.idle_timeout_ms);
  if (idle.count() > 0 && s.agent_requests == 0 && Clock::now() - s.last_request >= idle) {
    ++counters_.idle_stopped;
    spdlog::info("pool: {}: no request for {} ms (its idle timeout): its client went away", id,
                 idle.count());
    stop(s, "no request named it for " + std::to_string(idle.count()) +
                " ms, its idle timeout (a client keeps it with GET, exec or POST keepalive)");
    return;
  }
  arm_lease(s);
}

void Pool::set_timer(Sandbox& sandbox, std::chrono::nanoseconds delay,
                     void (Pool::*on_fire)(const std::string&)) {
  cancel_timer(sandbox);
  auto timer =
      loop_.add_timer(delay, [this, on_fire, id = sandbox.record.id] { (this->*on_fire)(id); });
  if (timer) {
    sandbox.timer = *timer;
  } else {
    spdlog::error("pool: {}: no timer: {}", sandbox.record.id, timer.error().message());
  }
}

void Pool::cancel_timer(Sandbox& sandbox) {
  if (sandbox.timer) {
    (void)loop_.cancel_timer(*sandbox.timer);
    sandbox.timer.reset();
  }
}

void Pool::remove(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  cancel_timer(s);
  if (s.exit_watch) {
    (void)loop_.remove_watch(*s.exit_watch);
  }
  if (s.ready_watch) {
    (void)loop_.remove_watch(*s.ready_watch);
  }
  remove_files(s.record.files);
  remove_sandbox_dir(state_.sandbox_dir(id));
  if (s.jail_id) {
    if (!launcher_->forget(state_.sandbox_dir(id))) {
      schedule_cleanup();
    }
    if (jail_ids_) {
      jail_ids_->release(*s.jail_id);
    }
  }
  state_.remove_record(id);
  sandboxes_.erase(id);
}

void Pool::persist(const Sandbox& sandbox) {
  if (auto written = state_.write_record(sandbox.record); !written) {
    spdlog::error("pool: {}: {}; a restarted daemon will not find it", sandbox.record.id,
                  written.error().message());
  }
}

void Pool::refill() {
  for (const auto& [name, image] : images_.all()) {
    while (count(name, SandboxState::kReady) + count(name, SandboxState::kStarting) <
           image.spec.ready) {
      if (!images_.admit(image)) {
        break;  // at the limits: the next release or end refills
      }
      if (!launch(image)) {
        schedule_refill(options_.refill_backoff);
        break;
      }
    }
  }
}

void Pool::schedule_refill(std::chrono::milliseconds delay) {
  if (refill_timer_) {
    return;
  }
  auto timer = loop_.add_timer(delay, [this] {
    refill_timer_.reset();
    refill();
  });
  if (timer) {
    refill_timer_ = *timer;
  }
}

void Pool::schedule_cleanup() {
  if (cleanup_timer_) {
    return;
  }
  auto timer = loop_.add_timer(std::chrono::milliseconds(500), [this] {
    cleanup_timer_.reset();
    if (!launcher_->remove_left()) {
      schedule_cleanup();
    }
  });
  if (timer) {
    cleanup_timer_ = *timer;
  }
}

void Pool::shutdown() {
  if (refill_timer_) {
    (void)loop_.cancel_timer(*refill_timer_);
    refill_timer_.reset();
  }
  if (cleanup_timer_) {
    (void)loop_.cancel_timer(*cleanup_timer_);
    cleanup_timer_.reset();
  }
  if (health_timer_) {
    (void)loop_.cancel_timer(*health_timer_);
    health_timer_.reset();
  }
  images_.clear();   // nothing refills from here on
  waiters_.clear();  // the API stopped: nobody to answer
  if (sandboxes_.all().empty()) {
    agent_requests_.clear();  // any left were in sandboxes that ended: they end too
    state_.remove_own_files();
    return;
  }
  spdlog::info("pool: stopping {} sandboxes", sandboxes_.all().size());
  for (const auto& [id, s] : sandboxes_.all()) {
    (void)signal_pidfd(s->pidfd.get(), SIGTERM);
  }
  const auto wait_all = [this](std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    for (const auto& [id, s] : sandboxes_.all()) {
      while (!pidfd_exited(s->pidfd.get()) && Clock::now() < deadline) {
        pollfd p{.fd = s->pidfd.get(), .events = POLLIN, .revents = 0};
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        ::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count())));
      }
    }
  };
  wait_all(options_.stop_grace);
  for (const auto& [id, s] : sandboxes_.all()) {
    if (!pidfd_exited(s->pidfd.get())) {
      spdlog::warn("pool: {} did not stop on SIGTERM: SIGKILL", id);
      ::killpg(s->record.process.pid, SIGKILL);
      (void)signal_pidfd(s->pidfd.get(), SIGKILL);
    }
  }
  wait_all(options_.stop_grace);
  // Their VMMs are gone: the execs' connections broke, and their threads end.
  agent_requests_.clear();
  std::vector<std::string> ids;
  for (const auto& [id, s] : sandboxes_.all()) {
    (void)launcher_->reap(s->pidfd.get(), s->record.process.pid);
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    remove(id);
  }
  // The cgroups of VMMs killed above may stay busy a moment: a blocking wait is fine here.
  for (int tries = 0; tries < 40 && !launcher_->remove_left(); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (cleanup_timer_) {
    (void)loop_.cancel_timer(*cleanup_timer_);
    cleanup_timer_.reset();
  }
  state_.remove_own_files();
}

}  // namespace dsec::pool

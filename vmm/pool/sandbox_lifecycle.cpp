#include "vmm/pool/sandbox_lifecycle.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "vmm/jail/supervisor.h"
#include "vmm/pool/guest_resolver.h"
#include "vmm/pool/log_tail.h"
#include "vmm/pool/process_identity.h"

namespace dsec::pool {
namespace {

using Clock = std::chrono::steady_clock;

// How long a hung VMM has to log its vCPUs' state (SIGUSR1) before SIGKILL.
constexpr std::chrono::milliseconds kHungStateWait{500};

std::string new_sandbox_id() {
  std::array<uint8_t, 8> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    // getrandom on 8 bytes does not fail once the pool is initialized; the pid and the
    // clock keep ids distinct if it ever does.
    const auto now = Clock::now().time_since_epoch().count();
    return fmt::format("sb-{:x}-{:x}", ::getpid(), now);
  }
  std::string id = "sb-";
  for (const uint8_t b : bytes) {
    id += fmt::format("{:02x}", b);
  }
  return id;
}

void kill_group(const Sandbox& sandbox) {
  ::killpg(sandbox.record.process.pid, SIGKILL);
  (void)signal_pidfd(sandbox.pidfd.get(), SIGKILL);
}

}  // namespace

SandboxLifecycle::SandboxLifecycle(io::EventLoop& loop, const StateDir& state,
                                   const ImageStore& store, const PoolOptions& options,
                                   SandboxTable& sandboxes, const PoolImages& images,
                                   CloneResources& resources, PoolCounters& counters,
                                   LifecycleEvents events)
    : loop_(loop),
      state_(state),
      store_(store),
      options_(options),
      sandboxes_(sandboxes),
      images_(images),
      resources_(resources),
      counters_(counters),
      events_(std::move(events)) {}

PoolResult<Sandbox*> SandboxLifecycle::launch(const PoolImage& image) {
  DSEC_TRY(images_.admit(image));
  const std::string& name = image.spec.name;
  // Checked again: the files may have changed since the image was registered. The clone
  // inherits these descriptors and opens nothing of the store by name.
  auto image_files = store_.open_image(name);
  if (!image_files) {
    ++counters_.refill_errors;
    return std::unexpected(error(Failure::kUnavailable, "cannot start a clone of " + name + ": " +
                                                            image_files.error().message()));
  }
  const std::string id = new_sandbox_id();
  const auto jail_id = DSEC_TRY(resources_.take_jail_id());
  // Made now, while the pool refills, so that an acquire never waits for it.
  auto network_slot = resources_.take_network(image, image.spec.egress);
  if (!network_slot) {
    resources_.give_back(jail_id, std::nullopt);
    ++counters_.refill_errors;
    return std::unexpected(
        error(network_slot.error().kind,
              "cannot start a clone of " + name + ": " + network_slot.error().message));
  }
  auto launched = resources_.launch(id, *image_files, image, jail_id, *network_slot);
  if (!launched) {
    ++counters_.refill_errors;
    return std::unexpected(error(Failure::kUnavailable, "cannot start a clone of " + name + ": " +
                                                            launched.error().message()));
  }
  auto sandbox = std::make_unique<Sandbox>();
  sandbox->record = SandboxRecord{.id = id,
                                  .image = name,
                                  .process = launched->identity,
                                  .files = state_.files_for(id),
                                  .state = SandboxState::kStarting,
                                  .expires_at_ms = 0,
                                  .network_slot = *network_slot,
                                  .egress = image.spec.egress};
  sandbox->pidfd = std::move(launched->pidfd);
  sandbox->ready = std::move(launched->ready);
  sandbox->launched = Clock::now();
  sandbox->jail_id = jail_id;
  sandbox->network_address = resources_.network_address(sandbox->record);
  Sandbox& s = sandboxes_.add(std::move(sandbox));
  resources_.persist(s);
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
    (void)resources_.reap(s);
    ++counters_.refill_errors;
    remove(id);
    return std::unexpected(
        error(Failure::kUnavailable, "cannot watch a new clone on the event loop"));
  }
  s.exit_watch = *exit_watch;
  s.ready_watch = *ready_watch;
  set_timer(s, options_.ready_timeout, [this](Sandbox& started) { on_ready_deadline(started); });
  spdlog::info("pool: {} started for image {} (pid {})", id, name, s.record.process.pid);
  return &s;
}

void SandboxLifecycle::on_ready_readable(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr || !found->ready) {
    return;
  }
  Sandbox& s = *found;
  std::array<char, 64> buffer{};
  const ssize_t n = ::read(s.ready.get(), buffer.data(), buffer.size());
  if (n > 0 && std::string_view(buffer.data(), static_cast<size_t>(n)).starts_with("ready\n")) {
    stop_watching_ready(s);
    if (s.record.network_slot && s.record.egress.resolver != 0) {
      sync_guest(s);  // the ready deadline still runs
      return;
    }
    become_ready(s);
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
    s.failed_to_start = true;
    stop(s, "its VMM wrote something other than the ready line");
    events_.start_failed(image);
  }
}

void SandboxLifecycle::sync_guest(Sandbox& sandbox) {
  const std::string id = sandbox.record.id;
  auto task = write_guest_resolver(
      loop_, sandbox.record.files.vsock, sandbox.record.egress.resolver,
      [this, id](Status written) {
        Sandbox* s = sandboxes_.find(id);
        if (s == nullptr || !s->guest_sync) {
          return;
        }
        // This runs inside the task's own completion: it goes when this returns.
        const auto finished = std::move(s->guest_sync);
        if (!written) {
          ++counters_.refill_errors;
          const std::string image = s->record.image;
          s->failed_to_start = true;
          stop(*s, "its guest's resolver could not be written: " + written.error().message());
          events_.start_failed(image);
          return;
        }
        become_ready(*s);
      });
  if (!task) {
    sandbox.failed_to_start = true;
    stop(sandbox, "cannot write its guest's resolver: " + task.error().message());
    return;
  }
  sandbox.guest_sync = std::move(*task);
}

void SandboxLifecycle::become_ready(Sandbox& s) {
  cancel_timer(s);
  restore_latency_.observe(Clock::now() - s.launched);
  s.record.state = SandboxState::kReady;
  resources_.persist(s);
  spdlog::info("pool: {} ready", s.record.id);
  events_.serving(s);
  refill();
}

void SandboxLifecycle::stop_watching_ready(Sandbox& sandbox) {
  if (sandbox.ready_watch) {
    (void)loop_.remove_watch(*sandbox.ready_watch);
    sandbox.ready_watch.reset();
  }
  sandbox.ready.reset();
}

void SandboxLifecycle::on_ready_deadline(Sandbox& sandbox) {
  ++counters_.refill_errors;
  spdlog::warn("pool: {} did not serve within {} ms; stopping it", sandbox.record.id,
               options_.ready_timeout.count());
  const std::string image = sandbox.record.image;
  sandbox.failed_to_start = true;
  stop(sandbox, "it did not serve within the ready timeout");
  events_.start_failed(image);
}

void SandboxLifecycle::on_exit(const std::string& id) {
  Sandbox* found = sandboxes_.find(id);
  if (found == nullptr) {
    return;
  }
  Sandbox& s = *found;
  const ProcessEnd end = resources_.reap(s);
  std::string how = end.how;
  // Without a supervisor (the pool's clones) its cgroup tells; a supervised one, adopted
  // from an older daemon, says so by exit status 5.
  if (s.jail_id && (end.exit_status == jail::kExitOomKilled || resources_.oom_killed(s))) {
    ++counters_.oom_killed;
    how =
        "was killed by its cgroup's OOM killer: it used more than its memory.max, the "
        "guest's RAM and the VMM's overhead";
  }
  const std::string tail = log_tail(s.record.files.log);
  switch (s.record.state) {
    case SandboxState::kStopping:
      spdlog::info("pool: {} stopped ({})", id, how);
      report_hung(s);  // when it ended before its state was logged
      if (s.failed_to_start) {
        // Not at once: a VMM that never serves would be started again in a tight loop.
        remove(id);
        schedule_refill(options_.refill_backoff);
        return;
      }
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
      events_.start_failed(image);
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

void SandboxLifecycle::mark_stopping(Sandbox& sandbox, std::string why) {
  sandboxes_.remember_end(sandbox.record, std::move(why));
  cancel_timer(sandbox);
  stop_watching_ready(sandbox);
  sandbox.record.state = SandboxState::kStopping;
  resources_.persist(sandbox);
}

void SandboxLifecycle::stop(Sandbox& sandbox, std::string why) {
  mark_stopping(sandbox, std::move(why));
  if (auto sent = signal_pidfd(sandbox.pidfd.get(), SIGTERM); !sent) {
    spdlog::warn("pool: {}: {}", sandbox.record.id, sent.error().message());
  }
  set_timer(sandbox, options_.stop_grace, [this](Sandbox& stopping) {
    spdlog::warn("pool: {} did not stop within {} ms of SIGTERM: SIGKILL", stopping.record.id,
                 options_.stop_grace.count());
    // The leader still lives (its pidfd has not fired), so its process group is still its.
    kill_group(stopping);
  });
}

void SandboxLifecycle::stop_hung(Sandbox& sandbox, std::string how) {
  sandbox.hung = std::move(how);
  mark_stopping(sandbox, "the sandbox was lost: its VMM " + sandbox.hung);
  // Before SIGKILL, SIGUSR1: a VMM whose signal thread still runs logs where its vCPUs and
  // devices stand, which tells a stalled guest from a stuck VMM. Its log is read, and the
  // VMM killed, when that had a moment to come or when the VMM ended, whichever is first.
  (void)signal_pidfd(sandbox.pidfd.get(), SIGUSR1);
  set_timer(sandbox, kHungStateWait, [this](Sandbox& hung) {
    report_hung(hung);
    // Hung: SIGTERM may go unheard. Its end (the pidfd) removes it and refills.
    kill_group(hung);
  });
}

void SandboxLifecycle::report_hung(Sandbox& s) {
  if (s.hung.empty()) {
    return;
  }
  const std::string tail = log_tail(s.record.files.log);
  spdlog::warn("pool: {} lost: its VMM {}; its log ended:\n{}", s.record.id, s.hung, tail);
  // The client that asks now learns what the log says too.
  sandboxes_.add_to_end(s.record.id, "; its log ended:\n" + tail);
  s.hung.clear();
}

void SandboxLifecycle::set_timer(Sandbox& sandbox, std::chrono::nanoseconds delay,
                                 std::move_only_function<void(Sandbox&)> on_fire) {
  cancel_timer(sandbox);
  auto timer = loop_.add_timer(
      delay, [this, on_fire = std::move(on_fire), id = sandbox.record.id]() mutable {
        Sandbox* s = sandboxes_.find(id);
        if (s == nullptr) {
          return;
        }
        s->timer.reset();
        on_fire(*s);
      });
  if (timer) {
    sandbox.timer = *timer;
  } else {
    spdlog::error("pool: {}: no timer: {}", sandbox.record.id, timer.error().message());
  }
}

void SandboxLifecycle::cancel_timer(Sandbox& sandbox) {
  if (sandbox.timer) {
    (void)loop_.cancel_timer(*sandbox.timer);
    sandbox.timer.reset();
  }
}

void SandboxLifecycle::remove(const std::string& id) {
  Sandbox* s = sandboxes_.find(id);
  if (s == nullptr) {
    return;
  }
  cancel_timer(*s);
  if (s->exit_watch) {
    (void)loop_.remove_watch(*s->exit_watch);
  }
  if (s->ready_watch) {
    (void)loop_.remove_watch(*s->ready_watch);
  }
  resources_.release(*s);
  sandboxes_.erase(id);
}

void SandboxLifecycle::refill() {
  for (const auto& [name, image] : images_.all()) {
    while (sandboxes_.count(name, SandboxState::kReady) +
               sandboxes_.count(name, SandboxState::kStarting) <
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

void SandboxLifecycle::schedule_refill(std::chrono::milliseconds delay) {
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

void SandboxLifecycle::stop_all() {
  if (refill_timer_) {
    (void)loop_.cancel_timer(*refill_timer_);
    refill_timer_.reset();
  }
  resources_.stop_cleanup();
  if (sandboxes_.all().empty()) {
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
      kill_group(*s);
    }
  }
  wait_all(options_.stop_grace);
}

void SandboxLifecycle::remove_all() {
  if (sandboxes_.all().empty()) {
    return;
  }
  std::vector<std::string> ids;
  for (const auto& [id, s] : sandboxes_.all()) {
    (void)resources_.reap(*s);
    ids.push_back(id);
  }
  for (const auto& id : ids) {
    remove(id);
  }
  resources_.remove_left_now();
}

}  // namespace dsec::pool

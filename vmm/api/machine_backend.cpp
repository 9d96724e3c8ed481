#include "vmm/api/machine_backend.h"

#include <spdlog/spdlog.h>

#include "vmm/machine/clone_sync.h"

namespace dsec::api {

MachineBackend::MachineBackend(machine::Machine& vm) : vm_(&vm) {}

MachineBackend::MachineBackend(LoadSettings settings) : settings_(std::move(settings)) {}

machine::Machine* MachineBackend::vm() const {
  const std::lock_guard lock(mutex_);
  return vm_;
}

InstanceState MachineBackend::state() const {
  const auto* vm = this->vm();
  if (vm == nullptr) {
    return InstanceState::kNotStarted;
  }
  return vm->paused() ? InstanceState::kPaused : InstanceState::kRunning;
}

std::optional<machine::MachineConfig> MachineBackend::config() const {
  const auto* vm = this->vm();
  if (vm == nullptr) {
    return std::nullopt;
  }
  return vm->config();
}

Status MachineBackend::pause() {
  auto* vm = this->vm();
  if (vm == nullptr || vm->ended()) {
    return fail("the VM has ended");
  }
  vm->pause();
  if (!vm->paused()) {
    return fail("the VM ended while it was being paused");
  }
  return ok();
}

Status MachineBackend::resume() {
  auto* vm = this->vm();
  if (vm == nullptr || vm->ended()) {
    return fail("the VM has ended");
  }
  vm->resume();
  return sync_clone_once(*vm);
}

Status MachineBackend::create_snapshot(const SnapshotCreateRequest& request) {
  auto* vm = this->vm();
  if (vm == nullptr) {
    return fail("there is no VM to snapshot");
  }
  const auto figures = vm->snapshot(request.snapshot_path, request.mem_file_path);
  if (!figures) {
    return std::unexpected(figures.error().with_context("snapshot create"));
  }
  return ok();
}

Status MachineBackend::check_fresh() const {
  const std::lock_guard lock(mutex_);
  if (vm_ != nullptr) {
    return fail("this VMM already has a VM");
  }
  if (stopping_) {
    return fail("the VMM is stopping");
  }
  return ok();
}

namespace {

// Starts a VM that a boot or a load just built.
Result<std::unique_ptr<machine::Machine>> started(
    Result<std::unique_ptr<machine::Machine>> built) {
  if (!built) {
    return built;
  }
  if (auto running = (*built)->start(); !running) {
    return std::unexpected(running.error().with_context("starting the VM"));
  }
  return built;
}

}  // namespace

Status MachineBackend::load_snapshot(const SnapshotLoadRequest& request) {
  DSEC_TRY(check_fresh());
  const auto overrides = restore_overrides(request);
  DSEC_TRY(build_and_adopt(
      [&request, &overrides, &host = settings_.host] {
        return started(machine::Machine::restore(request.snapshot_path, request.mem_file_path,
                                                 overrides, host,
                                                 /*paused=*/!request.resume_vm));
      },
      /*clone=*/true, "snapshot load"));
  spdlog::info("api: snapshot {} loaded ({})", request.snapshot_path,
               request.resume_vm ? "running" : "paused");
  machine::Machine* loaded = vm();
  return request.resume_vm && loaded != nullptr ? sync_clone_once(*loaded) : ok();
}

Status MachineBackend::boot(const machine::MachineConfig& guest) {
  DSEC_TRY(check_fresh());
  machine::MachineConfig config = guest;
  machine::take_host_settings(config, settings_.host);
  DSEC_TRY(build_and_adopt([&config] { return started(machine::Machine::create(config)); },
                           /*clone=*/false, "InstanceStart"));
  spdlog::info("api: the VM started ({} vCPUs, {} MiB)", config.vcpus, config.memory_mib);
  return ok();
}

Status MachineBackend::build_and_adopt(Build build, bool clone, const char* what) {
  std::unique_lock lock(mutex_);
  if (vm_ != nullptr || stopping_ || pending_build_) {
    return fail(std::string(what) + ": " +
                (stopping_ ? "the VMM is stopping" : "this VMM already has a VM"));
  }
  // The build refers to this thread's request: it waits here until the build ran.
  pending_build_ = std::move(build);
  pending_clone_ = clone;
  build_outcome_.reset();
  changed_.notify_all();
  changed_.wait(lock, [this] { return build_outcome_.has_value(); });
  std::optional<Status> taken;
  taken.swap(build_outcome_);
  const Status outcome = taken.value_or(fail("the build left no outcome"));
  if (!outcome) {
    return std::unexpected(outcome.error().with_context(what));
  }
  return ok();
}

machine::Machine* MachineBackend::run_builds() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return static_cast<bool>(pending_build_) || stopping_; });
    if (!pending_build_) {
      return vm_;
    }
    Build build = std::move(pending_build_);
    pending_build_ = nullptr;
    const bool clone = pending_clone_;
    building_ = true;
    lock.unlock();
    auto vm = build();
    const Status outcome = vm ? adopt(std::move(*vm), clone) : Status(std::unexpected(vm.error()));
    lock.lock();
    building_ = false;
    build_outcome_ = outcome;
    changed_.notify_all();
    if (vm_ != nullptr) {
      return vm_;
    }
  }
}

Status MachineBackend::adopt(std::unique_ptr<machine::Machine> vm, bool clone) {
  machine::Machine* started = vm.get();
  bool stopping = false;
  {
    const std::lock_guard lock(mutex_);
    owned_ = std::move(vm);
    vm_ = started;
    clone_unsynced_ = clone;
    stopping = stopping_;
  }
  changed_.notify_all();
  if (stopping) {
    started->stop("the VMM is stopping");
    return fail("the VMM is stopping");
  }
  return ok();
}

Status MachineBackend::send_ctrl_alt_del() {
  auto* vm = this->vm();
  if (vm == nullptr) {
    return fail("there is no VM");
  }
  return vm->send_ctrl_alt_del();
}

Status MachineBackend::set_drive_rate_limiter(size_t index,
                                              const devices::RateLimiterConfig& limiter) {
  auto* vm = this->vm();
  if (vm == nullptr) {
    return fail("there is no VM");
  }
  return vm->set_drive_rate_limiter(index, limiter);
}

Status MachineBackend::set_drive_file(size_t index, const std::string& path) {
  auto* vm = this->vm();
  if (vm == nullptr) {
    return fail("there is no VM");
  }
  return vm->set_drive_file(index, path);
}

Status MachineBackend::set_net_rate_limiters(size_t index, const devices::RateLimiterConfig& rx,
                                             const devices::RateLimiterConfig& tx) {
  auto* vm = this->vm();
  if (vm == nullptr) {
    return fail("there is no VM");
  }
  return vm->set_net_rate_limiters(index, rx, tx);
}

Status MachineBackend::configure_logger(const LoggerRequest& request) {
  if (!settings_.configure_logger) {
    return fail("this VMM's log cannot be configured through its API");
  }
  return settings_.configure_logger(request);
}

Status MachineBackend::configure_metrics(const std::string& path) {
  if (metrics_) {
    return fail("the metrics are configured already (to " + metrics_->path() +
                "): a VMM configures them once, as Firecracker does");
  }
  metrics_ = DSEC_TRY(MetricsSink::open(path));
  return ok();
}

Status MachineBackend::flush_metrics() {
  if (!metrics_) {
    return fail("the metrics are not configured: PUT /metrics with a metrics_path first");
  }
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  nlohmann::json report = {
      {"utc_timestamp_ms",
       std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count()}};
  if (machine::Machine* machine = vm()) {
    machine->take_metrics_report(report);
  }
  return metrics_->write_line(report.dump());
}

Status MachineBackend::sync_clone_once(machine::Machine& vm) {
  {
    const std::lock_guard lock(mutex_);
    if (!clone_unsynced_) {
      return ok();
    }
    clone_unsynced_ = false;
  }
  if (auto synced = machine::sync_restored_clone(vm, settings_.agent_timeout); !synced) {
    // A clone that kept its snapshot's RNG state would share it with every other clone:
    // it does not run on.
    {
      const std::lock_guard lock(mutex_);
      clone_sync_failed_ = true;
    }
    vm.stop("the clone's agent did not take its entropy and clock");
    return std::unexpected(synced.error().with_context(
        "the clone's agent did not take fresh entropy and the host's clock, so the VM was "
        "stopped"));
  }
  spdlog::info("api: the clone's agent took fresh entropy and the host's clock");
  return ok();
}

void MachineBackend::stop(const std::string& why) {
  machine::Machine* vm = nullptr;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    vm = vm_;
    // A build not taken yet will not be: run_builds() returns once it sees stopping_, and
    // its caller may have gone. The request waiting for it is answered now.
    if (pending_build_ && !building_) {
      pending_build_ = nullptr;
      build_outcome_ = fail("the VMM is stopping");
    }
  }
  changed_.notify_all();
  if (vm != nullptr) {
    vm->stop(why);
  }
}

bool MachineBackend::clone_sync_failed() const {
  const std::lock_guard lock(mutex_);
  return clone_sync_failed_;
}

}  // namespace dsec::api

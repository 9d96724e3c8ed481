// The API's backend over machine::Machine: either the VM a command booted or restored
// (`run --api-sock`, `restore --api-sock`), or, on a fresh VMM (`serve --api-sock`), the
// one InstanceStart boots or PUT /snapshot/load restores, and starts.
//
// A fresh VMM's VM is built and started on the thread that waits in run_builds() (serve's
// main thread), never on the API thread: that one parses every request, and runs under its
// seccomp filter from its start, which allows no VM to be made.
//
// Its calls come from the API thread; run_builds(), stop() and vm() from others.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "vmm/api/vm_backend.h"
#include "vmm/common/metrics_sink.h"
#include "vmm/machine/machine.h"

namespace dsec::api {

class MachineBackend final : public VmBackend {
 public:
  // What a boot or a load needs that the API does not give.
  struct LoadSettings {
    machine::MachineConfig host;  // console fds, KVM device, process start, seccomp
    // How long a resumed clone's agent has to take its entropy and clock.
    std::chrono::milliseconds agent_timeout{30000};
    // Sends the VMM's log where PUT /logger says; empty: the log cannot be configured.
    std::function<Status(const LoggerRequest&)> configure_logger;
  };

  // The VM exists and runs; `vm` must outlive this object. A load is refused.
  explicit MachineBackend(machine::Machine& vm);
  // A fresh VMM: boot() or load_snapshot() builds the VM, which this object then owns.
  explicit MachineBackend(LoadSettings settings);
  MachineBackend(const MachineBackend&) = delete;
  MachineBackend& operator=(const MachineBackend&) = delete;
  ~MachineBackend() override = default;

  InstanceState state() const override;
  std::optional<machine::MachineConfig> config() const override;
  Status pause() override;
  Status resume() override;
  Status create_snapshot(const SnapshotCreateRequest& request) override;
  Status load_snapshot(const SnapshotLoadRequest& request) override;
  Status boot(const machine::MachineConfig& guest) override;
  Status send_ctrl_alt_del() override;
  Status set_drive_rate_limiter(size_t index, const devices::RateLimiterConfig& limiter) override;
  Status set_net_rate_limiters(size_t index, const devices::RateLimiterConfig& rx,
                               const devices::RateLimiterConfig& tx) override;
  Status set_drive_file(size_t index, const std::string& path) override;
  Status configure_logger(const LoggerRequest& request) override;
  Status configure_metrics(const std::string& path) override;
  Status flush_metrics() override;
  // The metrics go to `sink`, opened already (--config-file's "metrics"); before serving.
  void use_metrics_sink(MetricsSink sink) { metrics_ = std::move(sink); }
  // Whether metrics are configured: the API's periodic flush writes a line then. On the
  // API thread.
  bool metrics_configured() const { return metrics_.has_value(); }

  // Builds and starts, on the calling thread, each VM that a boot or a load on the API
  // thread asks for, until one has started (returned) or stop() was called first (nullptr).
  // A build that failed is the API request's answer; the next one is waited for.
  machine::Machine* run_builds();
  // The VMM is stopping (a signal): stops the VM if there is one, makes run_builds()
  // return, and refuses a boot or load from now on (one under way stops its VM once
  // started).
  void stop(const std::string& why);
  // The VM, or nullptr; any thread.
  machine::Machine* vm() const;
  // A loaded VM that was stopped because its agent did not take its entropy and clock.
  bool clone_sync_failed() const;

 private:
  // Refuses a boot or load on a VMM that has a VM or is stopping.
  Status check_fresh() const;
  // What a boot or a load asks run_builds()'s thread to do: build the VM and start it.
  using Build = std::function<Result<std::unique_ptr<machine::Machine>>()>;
  // Hands `build` to run_builds()'s thread, waits for it, and takes the VM it started
  // (`what` names the request); a `clone` is synced the first time it runs.
  Status build_and_adopt(Build build, bool clone, const char* what);
  // On run_builds()'s thread: takes the VM a build started, or stops it when the VMM is
  // stopping.
  Status adopt(std::unique_ptr<machine::Machine> vm, bool clone);
  // A loaded clone is synced the first time it runs (at the load, or at its first resume).
  Status sync_clone_once(machine::Machine& vm);

  LoadSettings settings_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::unique_ptr<machine::Machine> owned_;  // a loaded VM
  machine::Machine* vm_ = nullptr;
  bool stopping_ = false;
  // A build handed to run_builds() and not taken yet, and the outcome of the one it ran.
  Build pending_build_;
  bool pending_clone_ = false;
  bool building_ = false;  // run_builds() runs one now
  std::optional<Status> build_outcome_;
  bool clone_unsynced_ = false;
  bool clone_sync_failed_ = false;
  // Where the metrics go; used on the API thread only.
  std::optional<MetricsSink> metrics_;
};

}  // namespace dsec::api

// For tests of the API: a VmBackend with no VM behind it. It keeps its state as a real
// VMM's would change (a load makes a paused or running VM, pause and resume flip it),
// records every call, and fails the next call when told to, so that tests see what the
// endpoints asked of it, and in which order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vmm/api/vm_backend.h"

namespace dsec::test {

class FakeVmBackend : public api::VmBackend {
 public:
  api::InstanceState current = api::InstanceState::kNotStarted;
  machine::MachineConfig machine_config;
  // "pause", "resume", "create", "load", "boot", "ctrl-alt-del", "logger",
  // "drive-rate-limiter", "net-rate-limiters", "metrics", "flush-metrics"
  std::vector<std::string> calls;
  std::optional<api::SnapshotCreateRequest> created;
  std::optional<api::SnapshotLoadRequest> loaded;
  std::optional<machine::MachineConfig> booted;
  std::optional<api::LoggerRequest> logger;
  std::optional<std::string> metrics_path;
  std::optional<std::string> fail_next;  // the next call fails with this message

  api::InstanceState state() const override { return current; }
  std::optional<machine::MachineConfig> config() const override {
    if (current == api::InstanceState::kNotStarted) {
      return std::nullopt;
    }
    return machine_config;
  }
  Status pause() override {
    DSEC_TRY(call("pause"));
    current = api::InstanceState::kPaused;
    return ok();
  }
  Status resume() override {
    DSEC_TRY(call("resume"));
    current = api::InstanceState::kRunning;
    return ok();
  }
  Status create_snapshot(const api::SnapshotCreateRequest& request) override {
    DSEC_TRY(call("create"));
    created = request;
    return ok();
  }
  Status load_snapshot(const api::SnapshotLoadRequest& request) override {
    DSEC_TRY(call("load"));
    loaded = request;
    current = request.resume_vm ? api::InstanceState::kRunning : api::InstanceState::kPaused;
    return ok();
  }
  Status boot(const machine::MachineConfig& guest) override {
    DSEC_TRY(call("boot"));
    booted = guest;
    machine_config = guest;
    current = api::InstanceState::kRunning;
    return ok();
  }
  Status send_ctrl_alt_del() override { return call("ctrl-alt-del"); }
  Status set_drive_rate_limiter(size_t index, const devices::RateLimiterConfig& limiter) override {
    DSEC_TRY(call("drive-rate-limiter"));
    machine_config.drives.at(index).rate_limiter = limiter;
    return ok();
  }
  Status set_drive_file(size_t index, const std::string& path) override {
    DSEC_TRY(call("drive-file"));
    machine_config.drives.at(index).path = path;
    return ok();
  }
  Status set_net_rate_limiters(size_t index, const devices::RateLimiterConfig& rx,
                               const devices::RateLimiterConfig& tx) override {
    DSEC_TRY(call("net-rate-limiters"));
    machine_config.nets.at(index).rx_rate_limiter = rx;
    machine_config.nets.at(index).tx_rate_limiter = tx;
    return ok();
  }
  Status configure_logger(const api::LoggerRequest& request) override {
    DSEC_TRY(call("logger"));
    logger = request;
    return ok();
  }
  Status configure_metrics(const std::string& path) override {
    DSEC_TRY(call("metrics"));
    metrics_path = path;
    return ok();
  }
  Status flush_metrics() override { return call("flush-metrics"); }

 private:
  Status call(const std::string& name) {
    calls.push_back(name);
    if (fail_next) {
      const std::string why = *fail_next;
      fail_next.reset();
      return fail(why);
    }
    return ok();
  }
};

}  // namespace dsec::test

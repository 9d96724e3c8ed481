// What the API drives: one VMM's VM, or none yet. The endpoints (vm_api) keep the order
// rules and talk only to this interface, so that tests and the fuzzer put a fake behind
// it; machine_backend is the real one, over machine::Machine.
#pragma once

#include <optional>
#include <string>

#include "vmm/api/preboot_requests.h"
#include "vmm/api/vm_requests.h"
#include "vmm/common/error.h"
#include "vmm/machine/machine_config.h"

namespace dsec::api {

// Firecracker's instance states, as GET / names them.
enum class InstanceState { kNotStarted, kRunning, kPaused };

class VmBackend {
 public:
  virtual ~VmBackend() = default;

  // kNotStarted until a VM exists (booted or loaded); it never goes back.
  virtual InstanceState state() const = 0;
  // The VM's configuration; nullopt while there is none.
  virtual std::optional<machine::MachineConfig> config() const = 0;
  // Called only while the VM runs, or is paused.
  virtual Status pause() = 0;
  virtual Status resume() = 0;
  // Called only while the VM is paused.
  virtual Status create_snapshot(const SnapshotCreateRequest& request) = 0;
  // Called only on a VMM without a VM (kNotStarted).
  virtual Status load_snapshot(const SnapshotLoadRequest& request) = 0;
  // Called only on a VMM without a VM: builds the VM `guest` describes (the host's
  // settings, console and seccomp, are the backend's) and starts it (InstanceStart).
  virtual Status boot(const machine::MachineConfig& guest) = 0;
  // Called only while the VM runs or is paused: asks the guest to shut down, as a
  // ctrl-alt-del on its keyboard does.
  virtual Status send_ctrl_alt_del() = 0;
  // Called only while the VM runs or is paused: drive `index` of config().drives, or
  // interface `index` of config().nets, limited by the rate limiters given from now on (PATCH
  // /drives/{id}, /network-interfaces/{id}); config() shows them.
  virtual Status set_drive_rate_limiter(size_t index,
                                        const devices::RateLimiterConfig& limiter) = 0;
  virtual Status set_net_rate_limiters(size_t index, const devices::RateLimiterConfig& rx,
                                       const devices::RateLimiterConfig& tx) = 0;
  // Called only while the VM runs or is paused: drive `index`'s disk is the file at `path`
  // (PATCH /drives/{id} with path_on_host); one that cannot be changes nothing.
  virtual Status set_drive_file(size_t index, const std::string& path) = 0;
  // The VMM's own log (PUT /logger); called only before there is a VM.
  virtual Status configure_logger(const LoggerRequest& request) = 0;
  // Firecracker's metrics (PUT /metrics): opens `path`, a file or a FIFO, for the metrics
  // lines; called only before there is a VM, and once.
  virtual Status configure_metrics(const std::string& path) = 0;
  // Writes one metrics line now (PUT /actions FlushMetrics); an error if configure_metrics()
  // was not called first.
  virtual Status flush_metrics() = 0;
};

}  // namespace dsec::api

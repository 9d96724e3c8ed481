#include "vmm/machine/clone_sync.h"

#include <spdlog/spdlog.h>

#include "vmm/agent/readiness.h"

namespace dsec::machine {

Status sync_restored_clone(Machine& vm, std::chrono::milliseconds timeout) {
  const auto& vsock = vm.config().vsock;
  if (!vsock) {
    spdlog::warn(
        "restore: the VM has no vsock device, so no agent to give the clone fresh "
        "entropy and the host's clock: it runs with the snapshot's");
    return ok();
  }
  DSEC_TRY(agent::sync_clone(vsock->uds_path, timeout, [&vm] { return !vm.ended(); }));
  vm.admit_every_vsock_connection();
  return ok();
}

}  // namespace dsec::machine

#include "vmm/pool/sandbox_control.h"

#include "vmm/api/api_client.h"
#include "vmm/api/vm_control.h"

namespace dsec::pool {
namespace {

api::ApiClient client(const std::string& api_socket) {
  return {api_socket, kSandboxApiTimeout,
          api::ApiServerKind{.socket = "sandbox API socket",
                             .name = "sandbox's VMM",
                             .start_hint = "the sandbox's VMM has no API socket: it was started "
                                           "by an older daemon; release it and acquire another"}};
}

}  // namespace

Status set_sandbox_paused(const std::string& api_socket, bool paused) {
  return paused ? api::pause_vm(client(api_socket)) : api::resume_vm(client(api_socket));
}

Status snapshot_sandbox(const std::string& api_socket, const std::string& dir, bool paused) {
  // A sandbox its client paused stays paused; one that ran runs on.
  DSEC_TRY(api::create_snapshot(client(api_socket), dir, /*resume=*/!paused));
  return ok();
}

}  // namespace dsec::pool

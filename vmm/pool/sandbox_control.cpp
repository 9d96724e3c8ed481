#include "vmm/pool/sandbox_control.h"

#include <nlohmann/json.hpp>

#include "vmm/api/api_client.h"
#include "vmm/snapshot/snapshot_dir.h"

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
  return client(api_socket)
      .send("PATCH", "/vm", nlohmann::json{{"state", paused ? "Paused" : "Resumed"}});
}

Status snapshot_sandbox(const std::string& api_socket, const std::string& dir, bool paused) {
  const auto vmm = client(api_socket);
  if (!paused) {
    DSEC_TRY(vmm.send("PATCH", "/vm", nlohmann::json{{"state", "Paused"}}));
  }
  const auto files = snapshot::snapshot_files(dir);
  const Status created =
      vmm.send("PUT", "/snapshot/create",
               nlohmann::json{{"snapshot_path", files.state}, {"mem_file_path", files.memory}});
  if (!paused) {
    if (const Status resumed = vmm.send("PATCH", "/vm", nlohmann::json{{"state", "Resumed"}});
        !resumed) {
      if (created) {
        return resumed;
      }
      return fail(created.error().message() +
                  "; and resuming it failed: " + resumed.error().message());
    }
  }
  return created;
}

}  // namespace dsec::pool

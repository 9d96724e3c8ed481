#include "vmm/api/vm_control.h"

#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::api {
namespace {

Status set_state(const ApiClient& client, const char* state) {
  return client.send("PATCH", "/vm", {{"state", state}});
}

}  // namespace

Status pause_vm(const ApiClient& client) {
  return set_state(client, "Paused");
}

Status resume_vm(const ApiClient& client) {
  return set_state(client, "Resumed");
}

Result<std::filesystem::path> create_snapshot(const ApiClient& client, const std::string& out_dir,
                                              bool resume) {
  const auto info = DSEC_TRY(client.get("/"));
  const auto state = info.value("state", std::string());
  if (state != "Running" && state != "Paused") {
    return fail("the VMM on " + client.socket_path() + " has no VM to snapshot (state: " + state +
                ")");
  }
  std::error_code ec;
  const auto dir = std::filesystem::absolute(out_dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("cannot create the snapshot directory " + out_dir + ": " + ec.message());
  }
  if (state == "Running") {
    DSEC_TRY(pause_vm(client));
  }
  const auto files = snapshot::snapshot_files(dir);
  const auto created = client.send(
      "PUT", "/snapshot/create",
      {{"snapshot_type", "Full"}, {"snapshot_path", files.state}, {"mem_file_path", files.memory}});
  if (resume || (!created && state == "Running")) {
    DSEC_TRY(resume_vm(client));
  }
  DSEC_TRY(created);
  return dir;
}

}  // namespace dsec::api

#include "vmm/api/vm_control.h"

#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::api {
namespace {

Status set_state(const http::HttpClient& client, const char* state) {
  return client.send("PATCH", "/vm", {{"state", state}});
}

// "Running" or "Paused": a VM to snapshot.
Result<std::string> vm_state(const http::HttpClient& client) {
  const auto info = DSEC_TRY(client.get("/"));
  auto state = info.value("state", std::string());
  if (state != "Running" && state != "Paused") {
    return fail("the VMM on " + client.socket_path() + " has no VM to snapshot (state: " + state +
                ")");
  }
  return state;
}

// Pauses a running VM, has it write its snapshot into `vmm_dir` (its path as the VMM sees
// it), and resumes it if asked or if the snapshot failed.
Status write_snapshot(const http::HttpClient& client, const std::string& state,
                      const std::string& vmm_dir, bool resume) {
  if (state == "Running") {
    DSEC_TRY(pause_vm(client));
  }
  const auto files = snapshot::snapshot_files(vmm_dir);
  const auto created = client.send(
      "PUT", "/snapshot/create",
      {{"snapshot_type", "Full"}, {"snapshot_path", files.state}, {"mem_file_path", files.memory}});
  if (resume || (!created && state == "Running")) {
    DSEC_TRY(resume_vm(client));
  }
  DSEC_TRY(created);
  return ok();
}

}  // namespace

http::HttpClient vmm_api_client(const std::string& socket_path, std::chrono::milliseconds timeout) {
  return http::HttpClient(
      socket_path, timeout,
      http::HttpServerKind{.socket = "API socket",
                           .name = "VMM",
                           .start_hint = "start a VMM with --api-sock " + socket_path});
}

Status pause_vm(const http::HttpClient& client) {
  return set_state(client, "Paused");
}

Status resume_vm(const http::HttpClient& client) {
  return set_state(client, "Resumed");
}

Result<std::filesystem::path> create_snapshot(const http::HttpClient& client,
                                              const std::string& out_dir, bool resume) {
  const std::string state = DSEC_TRY(vm_state(client));
  std::error_code ec;
  const auto dir = std::filesystem::absolute(out_dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("cannot create the snapshot directory " + out_dir + ": " + ec.message());
  }
  DSEC_TRY(write_snapshot(client, state, dir.string(), resume));
  return dir;
}

Status create_snapshot_at(const http::HttpClient& client, const std::string& vmm_dir, bool resume) {
  return write_snapshot(client, DSEC_TRY(vm_state(client)), vmm_dir, resume);
}

}  // namespace dsec::api

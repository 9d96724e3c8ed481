// `dsec-vmm snapshot create|pause|resume --api-sock PATH`: a client of a running VMM's API
// socket (docs/api.md). create writes the snapshot directory `dsec-vmm restore` reads.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "vmm/api/api_client.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::cli {
namespace {

struct SnapshotOptions {
  std::string api_socket;
  std::string out;
  bool resume = false;
  double timeout_s = 300;
};

api::ApiClient client_of(const SnapshotOptions& o) {
  return api::ApiClient(o.api_socket,
                        std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
}

Status set_state(const api::ApiClient& client, const char* state) {
  return client.send("PATCH", "/vm", {{"state", state}});
}

Status create(const SnapshotOptions& o) {
  const auto client = client_of(o);
  const auto info = DSEC_TRY(client.get("/"));
  const auto state = info.value("state", std::string());
  if (state != "Running" && state != "Paused") {
    return fail("the VMM on " + o.api_socket + " has no VM to snapshot (state: " + state + ")");
  }
  // The VMM writes the files: it needs the directory, by a path that does not depend on
  // its working directory.
  std::error_code ec;
  const auto dir = std::filesystem::absolute(o.out, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return fail("cannot create --out " + o.out + ": " + ec.message());
  }
  if (state == "Running") {
    DSEC_TRY(set_state(client, "Paused"));
  }
  const auto files = snapshot::snapshot_files(dir);
  const auto created = client.send(
      "PUT", "/snapshot/create",
      {{"snapshot_type", "Full"}, {"snapshot_path", files.state}, {"mem_file_path", files.memory}});
  // A failed snapshot leaves the VM as it found it; --resume asks for a running VM anyway.
  if (o.resume || (!created && state == "Running")) {
    DSEC_TRY(set_state(client, "Resumed"));
  }
  DSEC_TRY(created);
  std::printf("%s\n", dir.c_str());
  return ok();
}

int report(const char* command, const Status& done) {
  if (!done) {
    (void)std::fprintf(stderr, "dsec-vmm snapshot %s: %s\n", command,
                       done.error().message().c_str());
    return 1;
  }
  return 0;
}

void add_socket_option(CLI::App& command, SnapshotOptions& options) {
  command.add_option("--api-sock", options.api_socket, "The VMM's API socket (its --api-sock)")
      ->required();
  command
      .add_option("--timeout", options.timeout_s,
                  "Seconds to wait for each answer (a snapshot writes all of the guest's memory)")
      ->capture_default_str();
}

}  // namespace

void add_snapshot_command(CLI::App& app, CommandAction& action) {
  auto options = std::make_shared<SnapshotOptions>();
  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Pause, resume or snapshot a running VMM through its API socket");
  snapshot->require_subcommand(1);
  snapshot->footer(
      "A client of the API of dsec-vmm run, restore or serve started with --api-sock "
      "(docs/api.md). Exit status 0 done, 1 refused: the socket is missing, nothing serves "
      "it, or the VMM answered with an error, whose fault_message is printed.");

  CLI::App* create_cmd = snapshot->add_subcommand(
      "create", "Write a snapshot of the VM: a directory that dsec-vmm restore starts clones of");
  create_cmd->footer(
      "Pauses the VM if it runs (PATCH /vm), writes --out/state and --out/memory (PUT "
      "/snapshot/create, the layout dsec-vmm warm writes), then leaves it paused, or resumes "
      "it with --resume (a failed snapshot resumes a VM it paused). --out is created if missing. "
      "Prints the directory.");
  add_socket_option(*create_cmd, *options);
  create_cmd->add_option("--out", options->out, "The snapshot's directory")->required();
  create_cmd->add_flag("--resume", options->resume, "Resume the VM after the snapshot");
  create_cmd->callback(
      [&action, options] { action = [options] { return report("create", create(*options)); }; });

  CLI::App* pause = snapshot->add_subcommand("pause", "Pause the VM (PATCH /vm Paused)");
  add_socket_option(*pause, *options);
  pause->callback([&action, options] {
    action = [options] { return report("pause", set_state(client_of(*options), "Paused")); };
  });
  CLI::App* resume = snapshot->add_subcommand("resume", "Resume the VM (PATCH /vm Resumed)");
  add_socket_option(*resume, *options);
  resume->callback([&action, options] {
    action = [options] { return report("resume", set_state(client_of(*options), "Resumed")); };
  });
}

}  // namespace dsec::cli

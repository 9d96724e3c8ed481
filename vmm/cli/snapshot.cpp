// `dsec-vmm snapshot create|pause|resume --api-sock PATH`: a client of a running VMM's API
// socket (docs/api.md). create writes the snapshot directory `dsec-vmm restore` reads.
#include <chrono>
#include <cstdio>

#include "vmm/api/vm_control.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/http/client.h"

namespace dsec::cli {
namespace {

struct SnapshotOptions {
  std::string api_socket;
  std::string out;
  bool resume = false;
  double timeout_s = 300;
};

http::HttpClient client_of(const SnapshotOptions& o) {
  return api::vmm_api_client(o.api_socket,
                             std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
}

Status create(const SnapshotOptions& o) {
  const auto dir = DSEC_TRY(api::create_snapshot(client_of(o), o.out, o.resume));
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
                  "Seconds to wait for each answer (a snapshot create writes all of the guest's "
                  "memory)")
      ->check(CLI::Range(0.1, 86400.0))
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
    action = [options] { return report("pause", api::pause_vm(client_of(*options))); };
  });
  CLI::App* resume = snapshot->add_subcommand("resume", "Resume the VM (PATCH /vm Resumed)");
  add_socket_option(*resume, *options);
  resume->callback([&action, options] {
    action = [options] { return report("resume", api::resume_vm(client_of(*options))); };
  });
}

}  // namespace dsec::cli

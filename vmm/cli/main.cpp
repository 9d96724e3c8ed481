// dsec-vmm: parses the command line and runs the chosen subcommand.
#include <pthread.h>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/log_output.h"

namespace {

// Threads get 1 MiB stacks instead of glibc's 8 MiB: an 8 MiB stack holds whole 2 MiB
// ranges, so where the host's transparent huge pages are `always` the first touch of its
// top put a 2 MiB huge page under it, 2 MiB of memory per VMM thread (seen in the test
// bed). A 1 MiB stack never holds one. Our threads need far less.
void limit_thread_stacks() {
  constexpr size_t kThreadStackSize = size_t{1} << 20;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) {
    return;
  }
  if (pthread_attr_setstacksize(&attr, kThreadStackSize) == 0) {
    (void)pthread_setattr_default_np(&attr);
  }
  pthread_attr_destroy(&attr);
}

// Started as `firecracker` (a symlink installed under Firecracker's name), the binary is
// `dsec-vmm firecracker`: the tools that exec Firecracker pass its options alone.
bool started_as_firecracker(const char* argv0) {
  const std::string_view name(argv0 == nullptr ? "" : argv0);
  const size_t slash = name.rfind('/');
  return name.substr(slash == std::string_view::npos ? 0 : slash + 1) == "firecracker";
}

}  // namespace

int main(int argc, char** argv) try {
  const auto process_start = std::chrono::steady_clock::now();
  // The VMM's log goes to stderr: stdout carries the guest's console (spdlog's default
  // logger would write to stdout, mixing the two).
  spdlog::set_default_logger(dsec::cli::make_vmm_logger());
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug shows the start-up phases
  limit_thread_stacks();
  // A closed pipe or socket (the console's reader gone, an exec's client) is an error the
  // write reports, never a signal that kills the VMM and its guest.
  (void)std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "dsec-vmm: a KVM virtual machine monitor for short-lived, isolated Linux sandboxes."};
  app.require_subcommand(1);

  dsec::cli::CommandAction action;
  dsec::cli::add_run_command(app, action, process_start);
  dsec::cli::add_warm_command(app, action, process_start);
  dsec::cli::add_restore_command(app, action, process_start);
  dsec::cli::add_serve_command(app, action, process_start);
  dsec::cli::add_firecracker_command(app, action, process_start);
  dsec::cli::add_snapshot_command(app, action);
  dsec::cli::add_smoke_command(app, action);
  dsec::cli::add_exec_command(app, action);
  dsec::cli::add_image_command(app, action);
  dsec::cli::add_pool_command(app, action);

  std::vector<char*> args(argv, argv + argc);
  if (argc > 0 && started_as_firecracker(argv[0])) {
    static char subcommand[] = "firecracker";
    args.insert(args.begin() + 1, subcommand);
    app.name("dsec-vmm");  // its help's usage line: "dsec-vmm firecracker [OPTIONS]"
  }
  CLI11_PARSE(app, static_cast<int>(args.size()), args.data());
  return action();
} catch (const std::exception& e) {
  // Nothing is meant to throw past a command (errors are values); if something does, say
  // what, rather than abort.
  (void)std::fprintf(stderr, "dsec-vmm: internal error: %s\n", e.what());
  return 1;
}

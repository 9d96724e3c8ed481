// The dsec-vmm subcommands. Each lives in its own file and registers itself on the app;
// parsing only records what to run, so nothing starts before the command line is valid.
#pragma once

#include <chrono>
#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

// The chosen subcommand's work; returns the process exit status.
using CommandAction = std::function<int()>;

// `dsec-vmm smoke`: checks that this host can run a VM (smoke.cpp).
void add_smoke_command(CLI::App& app, CommandAction& action);
// `dsec-vmm run`: boots a Linux guest (run.cpp). process_start: when main() began.
void add_run_command(CLI::App& app, CommandAction& action,
                     std::chrono::steady_clock::time_point process_start);

// `dsec-vmm restore`: a VM from a snapshot (restore.cpp).
void add_restore_command(CLI::App& app, CommandAction& action,
                         std::chrono::steady_clock::time_point process_start);
// `dsec-vmm warm`: boot, set up and snapshot an image (warm.cpp).
void add_warm_command(CLI::App& app, CommandAction& action,
                      std::chrono::steady_clock::time_point process_start);

// `dsec-vmm serve`: a fresh VMM that waits for PUT /snapshot/load (serve.cpp).
void add_serve_command(CLI::App& app, CommandAction& action,
                       std::chrono::steady_clock::time_point process_start);
// `dsec-vmm firecracker`: Firecracker's command line for `serve`'s VMM (firecracker.cpp).
void add_firecracker_command(CLI::App& app, CommandAction& action,
                             std::chrono::steady_clock::time_point process_start);
// `dsec-vmm snapshot create|pause|resume`: a client of a VMM's API socket (snapshot.cpp).
void add_snapshot_command(CLI::App& app, CommandAction& action);

// `dsec-vmm exec` and `dsec-vmm cp`: through a running guest's agent (exec.cpp).
void add_exec_command(CLI::App& app, CommandAction& action);

// `dsec-vmm pool`: executes the pool daemon, dsec-vmm-pool (pool.cpp).
void add_pool_command(CLI::App& app, CommandAction& action);

// `dsec-vmm image list`: sandbox images in the cache (image.cpp).
void add_image_command(CLI::App& app, CommandAction& action);

}  // namespace dsec::cli

// The pool daemon's command line (pool_command.cpp): its options, checked before anything
// is made, and the daemon's run. Served by the dsec-vmm-pool program (main.cpp), which
// `dsec-vmm pool` executes.
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

// One line on what the daemon is, for dsec-vmm's --help and the daemon's own.
inline constexpr const char* kPoolSummary =
    "Run the node's sandbox pool daemon: warm images registered over an HTTP/JSON API on a "
    "Unix socket, clones restored ahead and handed out (docs/pool.md)";

// Adds the daemon's options to `pool` (the program's app); once parsed, `action` runs the
// daemon and returns the process's exit status.
void configure_pool_command(CLI::App* pool, std::function<int()>& action);

}  // namespace dsec::cli

// `--seccomp=on|log|off`, on every command that runs a VM (run, warm, restore, serve), and
// on the pool daemon.
#pragma once

#include <string>

#include "vmm/seccomp/policy.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

// Registers --seccomp on `command`, into `mode` (on by default); `filtered` says whose
// threads are filtered (the VMM's, one filter per thread role, by default).
void add_seccomp_option(CLI::App& command, seccomp::Mode& mode,
                        const std::string& filtered = "the VMM's threads, one per thread role");

}  // namespace dsec::cli

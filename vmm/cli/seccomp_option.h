// `--seccomp=on|log|off`, on every command that runs a VM (run, warm, restore, serve).
#pragma once

#include "vmm/seccomp/policy.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

// Registers --seccomp on `command`, into `mode` (on by default).
void add_seccomp_option(CLI::App& command, seccomp::Mode& mode);

}  // namespace dsec::cli

// `--netns NAME` on run and restore: the VMM runs in a network namespace that its caller
// made (a clone network, docs/network.md), so its TAP is the one there.
#pragma once

#include <string>

#include "vmm/common/error.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

// Registers --netns on `command`, into `name`.
void add_netns_option(CLI::App& command, std::string& name);

// Moves this process (its one thread, before any other starts and before any seccomp
// filter) into the network namespace `name` names (/run/netns/NAME or an absolute path);
// nothing when `name` is empty.
Status join_netns(const std::string& name);

}  // namespace dsec::cli

#include "vmm/cli/netns_option.h"

#include "vmm/cli/cli11.h"
#include "vmm/common/network_namespace.h"

namespace dsec::cli {

void add_netns_option(CLI::App& command, std::string& name) {
  command.add_option(
      "--netns", name,
      "Run the VMM in this network namespace: NAME is /run/netns/NAME (as `ip netns` names "
      "it), or give the absolute path of a namespace's file. Its TAP (--net, or a snapshot's "
      "own) is opened there, so the VM attaches to a network its caller made, e.g. a clone's "
      "network with the snapshot's TAP name (docs/network.md). With --jail the jailed VMM "
      "stays in it instead of making an empty one. Joined first, before any thread or "
      "seccomp filter; needs root");
}

Status join_netns(const std::string& name) {
  if (name.empty()) {
    return ok();
  }
  const auto fd = DSEC_TRY(open_network_namespace(name));
  return enter_network_namespace(fd.get(), "--netns " + name);
}

}  // namespace dsec::cli

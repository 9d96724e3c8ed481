// The clone networks of a process that makes them for others (the pool daemon's, made in
// its launcher process: docs/network.md, "The pool's clones"), each known by its name.
// Behind an interface so that the daemon, whose seccomp filter allows no netlink socket,
// asks the unfiltered launcher (pool/launcher_networks.h), and tests make them in-process
// (network/clone_network_host.h).
#pragma once

#include <string>

#include "vmm/common/error.h"
#include "vmm/network/clone_network.h"

namespace dsec::network {

class CloneNetworks {
 public:
  CloneNetworks() = default;
  CloneNetworks(const CloneNetworks&) = delete;
  CloneNetworks& operator=(const CloneNetworks&) = delete;
  virtual ~CloneNetworks() = default;

  // CloneNetwork::make, held under config.name until remove().
  virtual Status make(const CloneNetworkConfig& config) = 0;
  // CloneNetwork::adopt: a network a killed process made, whose clone still runs.
  virtual Status adopt(const CloneNetworkConfig& config) = 0;
  virtual Status set_egress(const std::string& name, const EgressPolicy& policy) = 0;
  virtual Result<CloneNetworkCounters> counters(const std::string& name) = 0;
  // A host port whose TCP connections go to `guest_port` of network `name`'s guest
  // (host_port_forwards.h); removed with the network.
  // `host_port` 0: any free one; else that one (HostPortForwards::add).
  virtual Result<uint16_t> forward_port(const std::string& name, uint16_t guest_port,
                                        uint16_t host_port) = 0;
  // Removes the network `name`: the one held, or else what a killed process left of it
  // under `run_dir` (CloneNetwork::remove_stale). Nothing there is no error.
  virtual Status remove(const std::string& name, const std::string& run_dir) = 0;
};

}  // namespace dsec::network

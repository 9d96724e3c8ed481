// The clone networks this process makes and holds, by name (clone_networks.h): the pool's
// launcher process keeps its clones' here, and serves the daemon's requests for them as
// JSON, one request and its answer at a time:
//   {"op": "make"|"adopt", "config": clone_network_json}   -> {}
//   {"op": "egress", "name": N, "egress": egress_json}      -> {}
//   {"op": "counters", "name": N}                           -> {"counters": counters_json}
//   {"op": "forward", "name": N, "guest_port": P}           -> {"host_port": H}
//   {"op": "remove", "name": N, "run_dir": D}               -> {}
// and {"error": "..."} when one fails.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "vmm/network/clone_network.h"
#include "vmm/network/clone_networks.h"
#include "vmm/network/host_port_forwards.h"

namespace dsec::network {

// The host ports forward_port hands out.
inline constexpr uint16_t kFirstForwardedPort = 30000;
inline constexpr uint16_t kLastForwardedPort = 32767;

class CloneNetworkHost final : public CloneNetworks {
 public:
  CloneNetworkHost() = default;
  // Removes every network held.
  ~CloneNetworkHost() override = default;

  Status make(const CloneNetworkConfig& config) override;
  Status adopt(const CloneNetworkConfig& config) override;
  Status set_egress(const std::string& name, const EgressPolicy& policy) override;
  Result<CloneNetworkCounters> counters(const std::string& name) override;
  Result<uint16_t> forward_port(const std::string& name, uint16_t guest_port,
                                uint16_t host_port) override;
  Status remove(const std::string& name, const std::string& run_dir) override;

  // One request as above; the answer's JSON text.
  std::string serve(std::string_view request);

  size_t size() const { return held_.size(); }

 private:
  Result<CloneNetwork*> find(const std::string& name);

  std::map<std::string, CloneNetwork> held_;
  HostPortForwards ports_{kFirstForwardedPort, kLastForwardedPort};
};

}  // namespace dsec::network

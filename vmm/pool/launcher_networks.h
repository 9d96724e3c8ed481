// The pool daemon's clone networks, made and held by its launcher process
// (launcher_process.h): the daemon's seccomp filter (role pool) allows no netlink socket,
// mount or setns, and the launcher, forked before the filter, runs without one. Each call
// is one request to it and blocks until its answer (a network takes milliseconds).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "vmm/network/clone_networks.h"
#include "vmm/pool/launcher_process.h"

namespace dsec::pool {

class LauncherNetworks final : public network::CloneNetworks {
 public:
  explicit LauncherNetworks(std::shared_ptr<LauncherProcess> launcher)
      : launcher_(std::move(launcher)) {}

  Status make(const network::CloneNetworkConfig& config) override;
  Status adopt(const network::CloneNetworkConfig& config) override;
  Status set_egress(const std::string& name, const network::EgressPolicy& policy) override;
  Result<network::CloneNetworkCounters> counters(const std::string& name) override;
  Result<uint16_t> forward_port(const std::string& name, uint16_t guest_port,
                                uint16_t host_port) override;
  Status remove(const std::string& name, const std::string& run_dir) override;

 private:
  Result<nlohmann::json> call(const nlohmann::json& request);

  std::shared_ptr<LauncherProcess> launcher_;
};

}  // namespace dsec::pool

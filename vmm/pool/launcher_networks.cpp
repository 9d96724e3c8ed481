#include "vmm/pool/launcher_networks.h"

#include <nlohmann/json.hpp>

#include "vmm/network/network_json.h"

namespace dsec::pool {

Result<nlohmann::json> LauncherNetworks::call(const nlohmann::json& request) {
  const std::string text = DSEC_TRY(launcher_->network(request.dump()));
  auto answer = nlohmann::json::parse(text, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    return fail("launcher: a network answer that is not a JSON object");
  }
  if (answer.contains("error")) {
    return fail(answer["error"].is_string() ? answer["error"].get<std::string>()
                                            : "launcher: a network request failed");
  }
  return answer;
}

Status LauncherNetworks::make(const network::CloneNetworkConfig& config) {
  DSEC_TRY(call({{"op", "make"}, {"config", network::clone_network_json(config)}}));
  return ok();
}

Status LauncherNetworks::adopt(const network::CloneNetworkConfig& config) {
  DSEC_TRY(call({{"op", "adopt"}, {"config", network::clone_network_json(config)}}));
  return ok();
}

Status LauncherNetworks::set_egress(const std::string& name, const network::EgressPolicy& policy) {
  DSEC_TRY(call({{"op", "egress"}, {"name", name}, {"egress", network::egress_json(policy)}}));
  return ok();
}

Result<network::CloneNetworkCounters> LauncherNetworks::counters(const std::string& name) {
  const auto answer = DSEC_TRY(call({{"op", "counters"}, {"name", name}}));
  if (!answer.contains("counters")) {
    return fail("launcher: a counters answer without counters");
  }
  return network::parse_counters_json(answer["counters"]);
}

Result<uint16_t> LauncherNetworks::forward_port(const std::string& name, uint16_t guest_port,
                                                uint16_t host_port) {
  nlohmann::json request = {{"op", "forward"}, {"name", name}, {"guest_port", guest_port}};
  if (host_port != 0) {
    request["host_port"] = host_port;
  }
  const auto answer = DSEC_TRY(call(request));
  if (!answer.contains("host_port") || !answer["host_port"].is_number_unsigned() ||
      answer["host_port"].get<uint64_t>() > 65535) {
    return fail("launcher: a forward answer without a host port");
  }
  return answer["host_port"].get<uint16_t>();
}

Status LauncherNetworks::remove(const std::string& name, const std::string& run_dir) {
  DSEC_TRY(call({{"op", "remove"}, {"name", name}, {"run_dir", run_dir}}));
  return ok();
}

}  // namespace dsec::pool

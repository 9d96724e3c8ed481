#include "vmm/network/clone_network_host.h"

#include <nlohmann/json.hpp>

#include "vmm/common/json_object.h"
#include "vmm/network/network_json.h"

namespace dsec::network {

Status CloneNetworkHost::make(const CloneNetworkConfig& config) {
  if (held_.contains(config.name)) {
    return fail("clone network " + config.name + " exists already", "remove it first");
  }
  held_.emplace(config.name, DSEC_TRY(CloneNetwork::make(config)));
  return ok();
}

Status CloneNetworkHost::adopt(const CloneNetworkConfig& config) {
  if (held_.contains(config.name)) {
    return fail("clone network " + config.name + " is held already");
  }
  held_.emplace(config.name, DSEC_TRY(CloneNetwork::adopt(config)));
  return ok();
}

Result<CloneNetwork*> CloneNetworkHost::find(const std::string& name) {
  const auto found = held_.find(name);
  if (found == held_.end()) {
    return fail("no clone network " + name);
  }
  return &found->second;
}

Status CloneNetworkHost::set_egress(const std::string& name, const EgressPolicy& policy) {
  return DSEC_TRY(find(name))->set_egress(policy);
}

Result<CloneNetworkCounters> CloneNetworkHost::counters(const std::string& name) {
  return DSEC_TRY(find(name))->counters();
}

Result<uint16_t> CloneNetworkHost::forward_port(const std::string& name, uint16_t guest_port,
                                                uint16_t host_port) {
  const CloneNetwork* network = DSEC_TRY(find(name));
  return ports_.add(name, network->namespace_veth_address(), guest_port, host_port);
}

Status CloneNetworkHost::remove(const std::string& name, const std::string& run_dir) {
  if (auto forwards = ports_.remove_owner(name); !forwards) {
    return forwards;
  }
  if (held_.erase(name) > 0) {
    return ok();  // the destructor removed it all
  }
  return CloneNetwork::remove_stale(name, run_dir);
}

std::string CloneNetworkHost::serve(std::string_view request) {
  auto answer = [&]() -> Result<nlohmann::json> {
    auto object = DSEC_TRY(JsonObject::parse(request, "a clone network request"));
    const std::string op = DSEC_TRY(object.string("op"));
    nlohmann::json out = nlohmann::json::object();
    if (op == "make" || op == "adopt") {
      const auto config = DSEC_TRY(parse_clone_network_json(DSEC_TRY(object.object("config"))));
      DSEC_TRY(object.finish());
      DSEC_TRY(op == "make" ? make(config) : adopt(config));
    } else if (op == "egress") {
      const auto name = DSEC_TRY(object.string("name"));
      const auto policy =
          DSEC_TRY(parse_egress_json(DSEC_TRY(object.object("egress")), ReservedAllow::kAllowed));
      DSEC_TRY(object.finish());
      DSEC_TRY(set_egress(name, policy));
    } else if (op == "counters") {
      const auto name = DSEC_TRY(object.string("name"));
      DSEC_TRY(object.finish());
      out["counters"] = counters_json(DSEC_TRY(counters(name)));
    } else if (op == "forward") {
      const auto name = DSEC_TRY(object.string("name"));
      const uint32_t port = DSEC_TRY(object.unsigned_int32("guest_port"));
      const auto host_port = DSEC_TRY(object.optional_unsigned_int("host_port")).value_or(0);
      DSEC_TRY(object.finish());
      if (port == 0 || port > 65535 || host_port > 65535) {
        return fail(
            "guest port " + std::to_string(port) + ", host port " + std::to_string(host_port),
            "give ports from 1 to 65535");
      }
      out["host_port"] = DSEC_TRY(
          forward_port(name, static_cast<uint16_t>(port), static_cast<uint16_t>(host_port)));
    } else if (op == "remove") {
      const auto name = DSEC_TRY(object.string("name"));
      const auto run_dir = DSEC_TRY(object.string("run_dir", JsonObject::Empty::kAllowed));
      DSEC_TRY(object.finish());
      DSEC_TRY(remove(name, run_dir));
    } else {
      return fail("unknown clone network request '" + op + "'");
    }
    return out;
  }();
  if (!answer) {
    return nlohmann::json{{"error", answer.error().message()}}.dump();
  }
  return answer->dump();
}

}  // namespace dsec::network

#include "vmm/api/mmds_requests.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>

namespace dsec::api {

Result<mmds::MmdsConfig> parse_mmds_config(JsonObject body,
                                           const std::vector<std::string>& iface_ids) {
  mmds::MmdsConfig config;
  const auto version = DSEC_TRY(body.optional_string("version")).value_or("V1");
  if (version != "V1" && version != "V2") {
    return fail(fmt::format("unknown MMDS version \"{}\"", version), "give \"V1\" or \"V2\"");
  }
  config.version = version == "V2" ? mmds::MmdsVersion::kV2 : mmds::MmdsVersion::kV1;
  for (const auto& id : DSEC_TRY(body.array("network_interfaces"))) {
    if (!id.is_string()) {
      return fail("\"network_interfaces\" must list interface ids (strings)");
    }
    config.network_interfaces.push_back(id.get<std::string>());
  }
  if (config.network_interfaces.empty()) {
    return fail(
        "The list of network interface IDs that allow forwarding MMDS requests is empty.",
        "name an interface configured with PUT /network-interfaces");
  }
  for (const auto& id : config.network_interfaces) {
    if (std::find(iface_ids.begin(), iface_ids.end(), id) == iface_ids.end()) {
      return fail(
          "The list of network interface IDs provided contains at least one ID that does not "
          "correspond to any existing network interface.",
          fmt::format("configure '{}' first (PUT /network-interfaces/{})", id, id));
    }
  }
  if (const auto address = DSEC_TRY(body.optional_string("ipv4_address"))) {
    in_addr parsed{};
    if (::inet_pton(AF_INET, address->c_str(), &parsed) != 1) {
      return fail(fmt::format("\"ipv4_address\" \"{}\" is not an IPv4 address", *address));
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(&parsed.s_addr);
    std::copy(bytes, bytes + 4, config.ipv4_address.begin());
    if (config.ipv4_address[0] != 169 || config.ipv4_address[1] != 254) {
      return fail("The MMDS IPv4 address is not link local.",
                  "give one in 169.254.0.0/16, as 169.254.169.254");
    }
  }
  config.imds_compat = DSEC_TRY(body.optional_boolean("imds_compat")).value_or(false);
  DSEC_TRY(body.finish());
  return config;
}

nlohmann::json mmds_config_json(const mmds::MmdsConfig& config) {
  const auto& a = config.ipv4_address;
  return {{"version", config.version == mmds::MmdsVersion::kV2 ? "V2" : "V1"},
          {"network_interfaces", config.network_interfaces},
          {"ipv4_address", fmt::format("{}.{}.{}.{}", a[0], a[1], a[2], a[3])},
          {"imds_compat", config.imds_compat}};
}

}  // namespace dsec::api

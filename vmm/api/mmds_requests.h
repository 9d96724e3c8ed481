// The bodies of Firecracker's MMDS endpoints: PUT /mmds/config (also a --config-file's
// "mmds-config") and its place in GET /vm/config.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/json_object.h"
#include "vmm/mmds/mmds_config.h"

namespace dsec::api {

// {"version": "V1"|"V2" (V1), "network_interfaces": [ids] (required, not empty),
//  "ipv4_address": a link-local IPv4 address (169.254.169.254), "imds_compat": bool};
// each id must be one of `iface_ids`, the interfaces configured so far.
Result<mmds::MmdsConfig> parse_mmds_config(JsonObject body,
                                           const std::vector<std::string>& iface_ids);

nlohmann::json mmds_config_json(const mmds::MmdsConfig& config);

}  // namespace dsec::api

// Clone networks as JSON (docs/network.md): the egress policy as the pool's API takes it
// (`{"mode": "none"|"all"|"allow", "allow": [...], "deny": [...]}`) and a clone network's
// whole configuration, as the pool daemon hands it to its launcher process
// (clone_networks.h). Pure: no system call, so the pool's library and the SDK link it
// without libmnl or libnftables.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "vmm/common/error.h"
#include "vmm/network/clone_network.h"
#include "vmm/network/egress_policy.h"

namespace dsec::network {

// "A.B.C.D/N", "A.B.C.D/N:PORT" or "A.B.C.D/N:FIRST-LAST": what parse_egress_rule reads.
std::string format_egress_rule(const EgressRule& rule);

// Whether a policy from a caller may name reserved destinations ("reserved_allow"): only
// the operator's may.
enum class ReservedAllow { kRefused, kAllowed };

nlohmann::json egress_json(const EgressPolicy& policy);
// Strict: unknown fields, a wrong type, a malformed rule, a list over kMaxEgressRules or
// "allow" without mode "allow" are refused, saying what to fix. A missing mode is "none".
Result<EgressPolicy> parse_egress_json(const nlohmann::json& value, ReservedAllow reserved);

nlohmann::json clone_network_json(const CloneNetworkConfig& config);
Result<CloneNetworkConfig> parse_clone_network_json(const nlohmann::json& value);

nlohmann::json counters_json(const CloneNetworkCounters& counters);
Result<CloneNetworkCounters> parse_counters_json(const nlohmann::json& value);

}  // namespace dsec::network

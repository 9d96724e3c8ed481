#include "vmm/network/network_json.h"

#include <fmt/format.h>

#include "vmm/common/json_object.h"

namespace dsec::network {
namespace {

constexpr const char* kRuleForms =
    "write each rule as \"A.B.C.D/N\", \"A.B.C.D/N:PORT\" or \"A.B.C.D/N:FIRST-LAST\" (ports 1 "
    "to 65535)";

Result<std::vector<EgressRule>> parse_rules(JsonObject& object, const char* name) {
  std::vector<EgressRule> rules;
  const auto list = DSEC_TRY(object.optional_array(name));
  if (!list) {
    return rules;
  }
  if (list->size() > kMaxEgressRules) {
    return fail(fmt::format("egress '{}' has {} rules", name, list->size()),
                fmt::format("give at most {}", kMaxEgressRules));
  }
  for (const auto& item : *list) {
    if (!item.is_string()) {
      return fail(fmt::format("egress '{}' holds {}, not a string", name, item.dump()), kRuleForms);
    }
    auto rule = parse_egress_rule(item.get<std::string>());
    if (!rule) {
      return fail(fmt::format("egress '{}': {}", name, rule.error().message()), kRuleForms);
    }
    rules.push_back(*rule);
  }
  return rules;
}

nlohmann::json rules_json(const std::vector<EgressRule>& rules) {
  auto list = nlohmann::json::array();
  for (const auto& rule : rules) {
    list.push_back(format_egress_rule(rule));
  }
  return list;
}

Result<Ipv4Cidr> cidr_field(JsonObject& object, const char* name) {
  return virtio::parse_ipv4_cidr(DSEC_TRY(object.string(name)));
}

}  // namespace

std::string format_egress_rule(const EgressRule& rule) {
  std::string text = to_string(rule.destination);
  if (rule.first_port != 0) {
    text += rule.first_port == rule.last_port
                ? fmt::format(":{}", rule.first_port)
                : fmt::format(":{}-{}", rule.first_port, rule.last_port);
  }
  return text;
}

nlohmann::json egress_json(const EgressPolicy& policy) {
  const char* mode = policy.mode == EgressPolicy::Mode::kAll         ? "all"
                     : policy.mode == EgressPolicy::Mode::kAllowList ? "allow"
                                                                     : "none";
  nlohmann::json value{
      {"mode", mode}, {"allow", rules_json(policy.allow)}, {"deny", rules_json(policy.deny)}};
  if (!policy.reserved_allow.empty()) {
    value["reserved_allow"] = rules_json(policy.reserved_allow);
  }
  if (policy.resolver != 0) {
    value["resolver"] = address_string(policy.resolver);
  }
  return value;
}

Result<EgressPolicy> parse_egress_json(const nlohmann::json& value, ReservedAllow reserved) {
  auto object = DSEC_TRY(JsonObject::of(value, "egress"));
  EgressPolicy policy;
  const std::string mode = DSEC_TRY(object.optional_string("mode")).value_or("none");
  if (mode == "all") {
    policy.mode = EgressPolicy::Mode::kAll;
  } else if (mode == "allow") {
    policy.mode = EgressPolicy::Mode::kAllowList;
  } else if (mode != "none") {
    return fail("egress mode '" + mode + "'", "give \"none\", \"all\" or \"allow\"");
  }
  policy.allow = DSEC_TRY(parse_rules(object, "allow"));
  policy.deny = DSEC_TRY(parse_rules(object, "deny"));
  if (reserved == ReservedAllow::kAllowed) {
    policy.reserved_allow = DSEC_TRY(parse_rules(object, "reserved_allow"));
  } else {
    DSEC_TRY(object.refuse("reserved_allow",
                           "only the operator's image may reach reserved destinations"));
  }
  if (const auto resolver = DSEC_TRY(object.optional_string("resolver"))) {
    policy.resolver = DSEC_TRY(parse_resolver(*resolver));
  }
  DSEC_TRY(object.finish());
  if (!policy.allow.empty() && policy.mode != EgressPolicy::Mode::kAllowList) {
    return fail("egress 'allow' is given with mode '" + mode + "'",
                "give \"mode\": \"allow\" with an allow list, or leave 'allow' out");
  }
  DSEC_TRY(validate(policy));
  return policy;
}

nlohmann::json clone_network_json(const CloneNetworkConfig& config) {
  auto reserved = nlohmann::json::array();
  for (const auto& cidr : config.reserved) {
    reserved.push_back(to_string(cidr));
  }
  return {{"name", config.name},
          {"run_dir", config.run_dir},
          {"tap_name", config.tap_name},
          {"tap_address", to_string(config.tap_address)},
          {"guest_address", config.guest_address},
          {"clone_range", to_string(config.clone_range)},
          {"slot", config.slot},
          {"egress", egress_json(config.egress)},
          {"reserved", reserved}};
}

Result<CloneNetworkConfig> parse_clone_network_json(const nlohmann::json& value) {
  auto object = DSEC_TRY(JsonObject::of(value, "a clone network"));
  CloneNetworkConfig config;
  config.name = DSEC_TRY(object.string("name"));
  config.run_dir = DSEC_TRY(object.string("run_dir", JsonObject::Empty::kAllowed));
  config.tap_name = DSEC_TRY(object.string("tap_name"));
  config.tap_address = DSEC_TRY(cidr_field(object, "tap_address"));
  config.guest_address = DSEC_TRY(object.unsigned_int32("guest_address"));
  config.clone_range = DSEC_TRY(cidr_field(object, "clone_range"));
  config.slot = DSEC_TRY(object.unsigned_int32("slot"));
  config.egress =
      DSEC_TRY(parse_egress_json(DSEC_TRY(object.object("egress")), ReservedAllow::kAllowed));
  for (const auto& item : DSEC_TRY(object.array("reserved"))) {
    if (!item.is_string()) {
      return fail("a clone network's reserved range is not a string");
    }
    config.reserved.push_back(DSEC_TRY(virtio::parse_ipv4_cidr(item.get<std::string>())));
  }
  DSEC_TRY(object.finish());
  return config;
}

nlohmann::json counters_json(const CloneNetworkCounters& c) {
  return {{"sent_bytes", c.sent_bytes},         {"sent_packets", c.sent_packets},
          {"received_bytes", c.received_bytes}, {"received_packets", c.received_packets},
          {"dropped_bytes", c.dropped_bytes},   {"dropped_packets", c.dropped_packets}};
}

Result<CloneNetworkCounters> parse_counters_json(const nlohmann::json& value) {
  auto object = DSEC_TRY(JsonObject::of(value, "a clone network's counters"));
  CloneNetworkCounters c;
  c.sent_bytes = DSEC_TRY(object.unsigned_int("sent_bytes"));
  c.sent_packets = DSEC_TRY(object.unsigned_int("sent_packets"));
  c.received_bytes = DSEC_TRY(object.unsigned_int("received_bytes"));
  c.received_packets = DSEC_TRY(object.unsigned_int("received_packets"));
  c.dropped_bytes = DSEC_TRY(object.unsigned_int("dropped_bytes"));
  c.dropped_packets = DSEC_TRY(object.unsigned_int("dropped_packets"));
  DSEC_TRY(object.finish());
  return c;
}

}  // namespace dsec::network

#include "vmm/network/egress_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <charconv>

namespace dsec::network {
namespace {

uint32_t mask_of(uint8_t prefix) {
  return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
}

Result<uint16_t> parse_port(const std::string& text, const std::string& rule) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535) {
    return fail("egress rule '" + rule + "': '" + text + "' is not a port",
                "give a port from 1 to 65535");
  }
  return static_cast<uint16_t>(value);
}

// Every packet of the guest's that the filter refuses is counted (CloneNetwork::counters).
std::string counted_drop() {
  return fmt::format("counter name \"{}\" drop", kEgressDropCounter);
}

std::string rule_match(const EgressRule& rule) {
  std::string match = "ip daddr " + to_string(rule.destination);
  if (rule.first_port != 0) {
    match += " meta l4proto { tcp, udp } th dport ";
    match += rule.first_port == rule.last_port
                 ? std::to_string(rule.first_port)
                 : fmt::format("{}-{}", rule.first_port, rule.last_port);
  }
  return match;
}

void add_rules(std::string& out, const std::vector<EgressRule>& rules, const std::string& tap,
               const std::string& verdict) {
  for (const auto& rule : rules) {
    out += fmt::format("    iifname \"{}\" {} {}\n", tap, rule_match(rule), verdict);
  }
}

}  // namespace

std::string to_string(Ipv4Cidr cidr) {
  in_addr address{.s_addr = htonl(cidr.address)};
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address, text, sizeof(text));
  return fmt::format("{}/{}", text, cidr.prefix);
}

std::string address_string(uint32_t address) {
  const std::string cidr = to_string({.address = address, .prefix = 32});
  return cidr.substr(0, cidr.find('/'));
}

Result<uint32_t> parse_resolver(const std::string& text) {
  in_addr parsed{};
  if (text.size() > INET_ADDRSTRLEN || ::inet_pton(AF_INET, text.c_str(), &parsed) != 1) {
    return fail("resolver '" + text + "' is not an IPv4 address", "give one as A.B.C.D");
  }
  const uint32_t address = ntohl(parsed.s_addr);
  if (address == 0 || address == 0xFFFFFFFF || (address >> 28) == 0xE) {
    return fail("resolver '" + text + "' is not one host's address",
                "give a unicast address, A.B.C.D");
  }
  return address;
}

Result<EgressRule> parse_egress_rule(const std::string& text) {
  const auto colon = text.find(':');
  EgressRule rule;
  rule.destination = DSEC_TRY(virtio::parse_ipv4_cidr(text.substr(0, colon)));
  if (colon != std::string::npos) {
    const std::string ports = text.substr(colon + 1);
    const auto dash = ports.find('-');
    rule.first_port = DSEC_TRY(parse_port(ports.substr(0, dash), text));
    rule.last_port = dash == std::string::npos ? rule.first_port
                                               : DSEC_TRY(parse_port(ports.substr(dash + 1), text));
  }
  DSEC_TRY(validate(EgressPolicy{.mode = EgressPolicy::Mode::kAllowList, .allow = {rule}}));
  return rule;
}

Status validate(const EgressPolicy& policy) {
  for (const auto* list : {&policy.allow, &policy.deny, &policy.reserved_allow}) {
    if (list->size() > kMaxEgressRules) {
      return fail(fmt::format("an egress list of {} rules", list->size()),
                  fmt::format("give at most {} in each list", kMaxEgressRules));
    }
    for (const auto& rule : *list) {
      if (rule.destination.prefix > 32 ||
          (rule.destination.address & ~mask_of(rule.destination.prefix)) != 0) {
        return fail("egress rule " + to_string(rule.destination) + " has host bits set",
                    "give the network's address (e.g. 10.0.0.0/8)");
      }
      if ((rule.first_port == 0) != (rule.last_port == 0) || rule.first_port > rule.last_port) {
        return fail(fmt::format("egress rule {}: ports {}-{} are not a range",
                                to_string(rule.destination), rule.first_port, rule.last_port),
                    "give FIRST-LAST with FIRST <= LAST");
      }
    }
  }
  return ok();
}

std::string egress_ruleset(const EgressPolicy& policy, const EgressScope& scope) {
  const std::string table = fmt::format("inet {}", kEgressTable);
  // Add (a no-op if it exists), delete, make anew: one transaction, so the old rules hold
  // until the new ones are in and a failure leaves the old ones.
  std::string out = fmt::format("table {}\ndelete table {}\ntable {} {{\n  counter {} {{ }}\n",
                                table, table, table, kEgressDropCounter);
  if (!scope.reserved.empty()) {
    out += "  set reserved {\n    type ipv4_addr; flags interval; auto-merge;\n    elements = { ";
    for (size_t i = 0; i < scope.reserved.size(); ++i) {
      out += (i == 0 ? "" : ", ") + to_string(scope.reserved[i]);
    }
    out += " }\n  }\n";
  }
  // Every packet the guest sends on a connection of its own is judged by the policy, not
  // only a connection's first: a change takes effect at the next packet, and a connection
  // the new policy refuses stops (its answers come in, but none of the guest's packets go
  // out). The guest's answers on connections made to it pass.
  out += "  chain forward {\n    type filter hook forward priority filter; policy drop;\n";
  out += fmt::format("    iifname \"{}\" oifname \"{}\" accept\n", scope.veth, scope.tap);
  out += fmt::format("    iifname \"{}\" ct direction reply accept\n", scope.tap);
  out += fmt::format("    iifname \"{}\" meta nfproto != ipv4 {}\n", scope.tap, counted_drop());
  // deny first: it wins over reserved_allow and allow alike.
  add_rules(out, policy.deny, scope.tap, counted_drop());
  add_rules(out, policy.reserved_allow, scope.tap, "accept");
  if (!scope.reserved.empty()) {
    out += fmt::format("    iifname \"{}\" ip daddr @reserved {}\n", scope.tap, counted_drop());
  }
  if (policy.resolver != 0) {
    out += fmt::format(
        "    iifname \"{}\" ip daddr {} meta l4proto {{ tcp, udp }} th dport 53 "
        "accept\n",
        scope.tap, address_string(policy.resolver));
  }
  if (policy.mode == EgressPolicy::Mode::kAll) {
    out += fmt::format("    iifname \"{}\" oifname \"{}\" accept\n", scope.tap, scope.veth);
  } else if (policy.mode == EgressPolicy::Mode::kAllowList) {
    add_rules(out, policy.allow, scope.tap, "accept");
  }
  out += fmt::format("    iifname \"{}\" {}\n  }}\n", scope.tap, counted_drop());
  // The namespace's own addresses (the TAP's, the veth's) are no way out: the guest reaches
  // nothing there but the answers to what the namespace itself sent.
  out += "  chain input {\n    type filter hook input priority filter; policy accept;\n";
  out += fmt::format("    iifname \"{}\" ct state established,related accept\n", scope.tap);
  out += fmt::format("    iifname \"{}\" {}\n  }}\n}}\n", scope.tap, counted_drop());
  return out;
}

}  // namespace dsec::network

// Where a clone's guest may send packets (docs/network.md): decided by the host and
// enforced by nftables in the clone's network namespace, which the guest cannot touch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/net/tap.h"

namespace dsec::network {

using virtio::Ipv4Cidr;

// A destination: an IPv4 range and, optionally, a TCP and UDP port range.
struct EgressRule {
  Ipv4Cidr destination{};   // 0.0.0.0/0: anywhere
  uint16_t first_port = 0;  // 0: every port and every protocol
  uint16_t last_port = 0;

  bool operator==(const EgressRule&) const = default;
};

// "A.B.C.D/N", "A.B.C.D/N:PORT" or "A.B.C.D/N:FIRST-LAST" (ports 1..65535).
Result<EgressRule> parse_egress_rule(const std::string& text);

// At most this many rules in each list (each is a rule the kernel walks per new connection).
inline constexpr size_t kMaxEgressRules = 256;

struct EgressPolicy {
  enum class Mode { kNone, kAll, kAllowList };
  Mode mode = Mode::kNone;          // none: nothing leaves (the default)
  std::vector<EgressRule> allow{};  // kAllowList: these destinations, nothing else
  std::vector<EgressRule> deny{};   // refused whatever the mode and `allow` say
  // The reserved destinations (the host's own addresses, link-local 169.254.0.0/16, the
  // clones' range, loopback, multicast) are reached by neither kAll nor `allow`: only by a
  // rule here, which names them on purpose (a resolver on the host, say). `deny` wins over
  // these too.
  std::vector<EgressRule> reserved_allow{};
  // A DNS resolver's IPv4 address, reached on port 53 (UDP and TCP) whatever the mode,
  // `none` included; 0: none. A reserved one (a resolver on the host) only where
  // `reserved_allow` names it too; `deny` wins over it.
  uint32_t resolver = 0;

  bool operator==(const EgressPolicy&) const = default;
};

// Checks the lists' sizes (kMaxEgressRules) and that each rule's range is a network
// address (no host bits set) with a sane port range.
Status validate(const EgressPolicy& policy);

// What the rule set is made for: the namespace's TAP (the guest's side) and veth (the way
// out), and the reserved ranges.
struct EgressScope {
  std::string tap{};
  std::string veth{};
  std::vector<Ipv4Cidr> reserved{};
};

// The name of the table egress_ruleset() writes (family inet), and of its counter of the
// guest's packets it refused.
inline constexpr const char* kEgressTable = "dsec_egress";
inline constexpr const char* kEgressDropCounter = "dropped";

// The nft commands that replace the egress table with `policy`'s, as one transaction: the
// forward chain drops by default, lets everything from the host's side to the guest through
// and the guest's answers on connections made to it, then judges each other packet of the
// guest's: deny (dropped), reserved_allow, the reserved ranges (dropped), the resolver's
// port 53, then allow or all; the input chain keeps the guest off the namespace's own addresses.
std::string egress_ruleset(const EgressPolicy& policy, const EgressScope& scope);

// "A.B.C.D/N".
std::string to_string(Ipv4Cidr cidr);

// A resolver's address, "A.B.C.D": one host can answer at (not 0.0.0.0, multicast or the
// broadcast address).
Result<uint32_t> parse_resolver(const std::string& text);
// "A.B.C.D".
std::string address_string(uint32_t address);

}  // namespace dsec::network

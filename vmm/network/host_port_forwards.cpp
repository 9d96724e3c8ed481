#include "vmm/network/host_port_forwards.h"

#include <fmt/format.h>

#include "vmm/network/egress_policy.h"
#include "vmm/network/nftables.h"

namespace dsec::network {
namespace {

std::string ip(uint32_t address) {
  const std::string cidr = to_string(Ipv4Cidr{.address = address, .prefix = 32});
  return cidr.substr(0, cidr.find('/'));
}

}  // namespace

HostPortForwards::~HostPortForwards() {
  if (!forwards_.empty()) {
    (void)clear();
  }
}

Status HostPortForwards::clear() {
  auto nft = DSEC_TRY(Nftables::open());
  return nft.apply(fmt::format("table ip {0}\ndelete table ip {0}\n", kPortsTable));
}

Result<uint16_t> HostPortForwards::add(const std::string& owner, uint32_t destination,
                                       uint16_t guest_port, uint16_t host_port) {
  if (guest_port == 0) {
    return fail("guest port 0", "give a port from 1 to 65535");
  }
  for (const auto& [port, forward] : forwards_) {
    if (forward.owner == owner && forward.guest_port == guest_port &&
        (host_port == 0 || host_port == port)) {
      return port;
    }
  }
  if (host_port != 0) {
    if (host_port < first_ || host_port > last_ || forwards_.contains(host_port)) {
      return fail(fmt::format("host port {} is not free to forward (ports {}-{}, each once)",
                              host_port, first_, last_));
    }
  }
  uint32_t port = host_port != 0 ? host_port : first_;
  while (port <= last_ && forwards_.contains(static_cast<uint16_t>(port))) {
    ++port;
  }
  if (port > last_) {
    return fail(fmt::format("every forwarded host port of {}-{} is taken", first_, last_),
                "release sandboxes, or forward fewer ports");
  }
  const auto chosen = static_cast<uint16_t>(port);
  forwards_[chosen] =
      PortForward{.owner = owner, .destination = destination, .guest_port = guest_port};
  if (auto written = write(); !written) {
    forwards_.erase(chosen);
    return std::unexpected(written.error());
  }
  return chosen;
}

Status HostPortForwards::remove_owner(const std::string& owner) {
  const size_t before = forwards_.size();
  std::erase_if(forwards_, [&](const auto& entry) { return entry.second.owner == owner; });
  if (forwards_.size() == before) {
    return ok();
  }
  return forwards_.empty() ? clear() : write();  // no table left behind with no forward
}

Status HostPortForwards::write() const {
  // Replaced whole: add (a no-op if it is there), delete, make anew, in one transaction.
  std::string rules;
  for (const auto& [port, forward] : forwards_) {
    rules += fmt::format("    tcp dport {} dnat to {}:{}\n", port, ip(forward.destination),
                         forward.guest_port);
  }
  // prerouting: connections from elsewhere; output: the host's own, to its own addresses.
  const std::string text = fmt::format(
      "table ip {0}\ndelete table ip {0}\ntable ip {0} {{\n"
      "  chain prerouting {{\n    type nat hook prerouting priority -100; policy accept;\n"
      "    fib daddr type local jump forwards\n  }}\n"
      "  chain output {{\n    type nat hook output priority -100; policy accept;\n"
      "    fib daddr type local jump forwards\n  }}\n"
      "  chain forwards {{\n{1}  }}\n}}\n",
      kPortsTable, rules);
  auto nft = DSEC_TRY(Nftables::open());
  return nft.apply(text);
}

}  // namespace dsec::network

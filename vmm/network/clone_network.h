// A network for one clone, as Firecracker's network-for-clones guide lays it out
// (docs/network.md): every clone of a snapshot wakes with the same guest address and the
// same TAP name, so each gets a network namespace of its own holding
//   - a TAP of the snapshot's name with the guest's gateway address (the VMM attaches to it:
//     dsec-vmm run/restore --netns),
//   - one end of a veth pair, whose other end is in the host's namespace; the pair has a /30
//     of the caller's clone range (host .1, namespace .2), the namespace's default route
//     goes through the host's end,
//   - NAT: the guest's address leaves as the namespace's veth address and answers come
//     back; connections to the namespace's veth address go to the guest,
//   - the egress policy's filter (egress_policy.h).
// Everything goes with the CloneNetwork; remove_stale() cleans what a killed process left.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/network_namespace.h"
#include "vmm/common/unique_fd.h"
#include "vmm/network/egress_policy.h"

namespace dsec::network {

struct CloneNetworkConfig {
  // Names the namespace (run_dir/name) and the host's veth end ("vh-" + name): 1 to 12
  // letters, digits, '-' or '_'.
  std::string name{};
  // Where the namespace is bind-mounted, so that another process (dsec-vmm --netns) can
  // join it by name; empty: nowhere, the CloneNetwork's fd alone holds it.
  std::string run_dir = kNetnsRunDir;
  std::string tap_name{};      // the snapshot's TAP
  Ipv4Cidr tap_address{};      // the TAP's address: the guest's gateway, e.g. 192.168.241.1/29
  uint32_t guest_address = 0;  // the guest's own, e.g. 192.168.241.2 (host byte order)
  Ipv4Cidr clone_range{};      // the /30s of every clone, e.g. 10.200.0.0/16 (reserved)
  uint32_t slot = 0;           // this clone's /30: the slot-th of clone_range
  EgressPolicy egress{};
  // More destinations that no policy reaches but by reserved_allow, beside the host's own
  // addresses (read when the policy is set), 169.254.0.0/16, clone_range and multicast.
  std::vector<Ipv4Cidr> reserved{};
};

// Checks names, ranges and the slot without touching the system.
Status validate(const CloneNetworkConfig& config);
Status validate_name(const std::string& name);

// The host's veth end of the clone network `name`.
std::string host_veth_name(const std::string& name);
inline constexpr const char* kNamespaceVeth = "veth0";  // the namespace's end

// A clone's traffic, for its metrics: what crossed the veth pair each way (counted at the
// host's end) and what the egress filter refused of the guest's.
struct CloneNetworkCounters {
  uint64_t sent_bytes = 0;  // out of the clone's namespace to the host's side
  uint64_t sent_packets = 0;
  uint64_t received_bytes = 0;  // from the host's side into the namespace
  uint64_t received_packets = 0;
  uint64_t dropped_bytes = 0;  // the guest's, refused by the filter since it was made
  uint64_t dropped_packets = 0;
};

class CloneNetwork {
 public:
  // Makes it all from the calling thread's network namespace, which is taken as the host's.
  // Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN), /dev/net/tun and nf_tables. On failure,
  // what was made is removed again.
  static Result<CloneNetwork> make(const CloneNetworkConfig& config);

  // Takes over the clone network that `config` describes, made by a process that died
  // without destroying it (a daemon killed and started again, whose clone still runs): its
  // namespace opened by name under config.run_dir, its host veth end and TAP checked to be
  // there, and its egress set anew from config.egress. From then on it is this one's to
  // change and remove. Needs a run_dir.
  static Result<CloneNetwork> adopt(const CloneNetworkConfig& config);

  // Removes what a CloneNetwork of `name` that was never destroyed (its process killed)
  // left: the host's veth end (and so its peer), the namespace's bind mount and file under
  // `run_dir`. The namespace, its TAP and rules go once nothing holds it. Missing pieces
  // are no error.
  static Status remove_stale(const std::string& name, const std::string& run_dir = kNetnsRunDir);

  CloneNetwork(CloneNetwork&&) noexcept;
  CloneNetwork& operator=(CloneNetwork&&) noexcept;
  ~CloneNetwork();

  // Replaces the egress filter, atomically: the old rules hold until the new ones are in,
  // and stay if the new ones fail. The host's addresses are read again.
  Status set_egress(const EgressPolicy& policy);

  int namespace_fd() const;
  // run_dir/name, or empty when not bind-mounted.
  const std::string& namespace_path() const;
  const CloneNetworkConfig& config() const;
  uint32_t host_veth_address() const;       // the /30's .1, in the host's namespace
  uint32_t namespace_veth_address() const;  // its .2: the clone's address seen from the host

  // The counters as they are now. The filter's drops are carried over each set_egress
  // (packets refused while the rule set is being replaced may go uncounted).
  Result<CloneNetworkCounters> counters() const;

  // `nft list ruleset` inside the namespace (for tests and a look by hand).
  Result<std::string> ruleset() const;

 private:
  struct State;
  explicit CloneNetwork(std::unique_ptr<State> state);
  Status build();

  std::unique_ptr<State> state_;
};

}  // namespace dsec::network

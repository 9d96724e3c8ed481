// The networks of the pool's clones (docs/network.md, "The pool's clones"): each clone of an
// image whose snapshot has a network device gets a network namespace of its own
// (network/clone_network.h), made before its VMM is restored into it (`restore --netns`),
// so that an acquire never waits for one. Each network has a slot of the clone range, one
// /30 per live clone, from a free-list as jail ids are; its name says its /30
// ("dp" and the /30's address in hex), so that a daemon started again knows which
// namespaces under the run directory are its own. The work is the CloneNetworks'
// (the launcher's, in the daemon: pool/launcher_networks.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "vmm/common/network_namespace.h"
#include "vmm/network/clone_networks.h"
#include "vmm/pool/jail_ids.h"
#include "vmm/pool/pool_error.h"

namespace dsec::pool {

// What each clone of an image needs for its network, read from the image's snapshot when
// it is registered: the TAP's name and host address (the guest's gateway). The guest's
// own address is taken to be the next one (192.168.241.2 for 192.168.241.1/29).
struct ImageNetwork {
  std::string tap;
  network::Ipv4Cidr tap_address{};
  uint32_t guest_address = 0;
  bool operator==(const ImageNetwork&) const = default;
};

// From a snapshot's network device: its TAP name and "A.B.C.D/N" host address.
Result<ImageNetwork> image_network(const std::string& tap, const std::string& host_cidr);

struct PoolNetworkOptions {
  network::Ipv4Cidr clone_range{.address = 0x0AC80000, .prefix = 16};  // 10.200.0.0/16
  std::string run_dir = kNetnsRunDir;
};

// "A.B.C.D/N" of --clone-network-range: a network of prefix 30 or less.
Result<network::Ipv4Cidr> parse_clone_range(const std::string& text);

class PoolNetworks {
 public:
  PoolNetworks(std::shared_ptr<network::CloneNetworks> networks, PoolNetworkOptions options);

  // A free slot and its network, made for a clone of `image` with `egress`; kFull when
  // every slot is taken, kUnavailable when the network could not be made.
  PoolResult<uint32_t> make(const ImageNetwork& image, const network::EgressPolicy& egress);
  // Takes over slot's network, which a daemon that ended made for a clone that still runs.
  Status adopt(uint32_t slot, const ImageNetwork& image, const network::EgressPolicy& egress);
  // Removes slot's network and frees the slot (failures are logged).
  void release(uint32_t slot);
  // Removes what a daemon that ended left of slot's network (its clone is gone).
  void remove_left(uint32_t slot);
  // Removes every network under the run directory named as this pool names them, in its
  // range, that no slot of this pool holds: a daemon killed between making one and
  // recording it.
  void remove_unknown();

  Status set_egress(uint32_t slot, const network::EgressPolicy& policy);
  Result<network::CloneNetworkCounters> counters(uint32_t slot);
  // `host_port` 0: any free one; else that one (a clone adopted with its ports).
  Result<uint16_t> forward_port(uint32_t slot, uint16_t guest_port, uint16_t host_port = 0) {
    return networks_->forward_port(name(slot), guest_port, host_port);
  }

  std::string name(uint32_t slot) const { return name_in(options_.clone_range, slot); }
  // The name of slot's network in `range`: "dp" and its /30's address in hex.
  static std::string name_in(network::Ipv4Cidr range, uint32_t slot);
  // What `restore --netns` joins: run_dir/name.
  std::string path(uint32_t slot) const { return options_.run_dir + "/" + name(slot); }
  size_t used() const { return slots_.used_count(); }
  // The namespace's veth address: connections from the host to it go to the guest.
  std::string guest_side_address(uint32_t slot) const;

 private:
  network::CloneNetworkConfig config(uint32_t slot, const ImageNetwork& image,
                                     const network::EgressPolicy& egress) const;

  std::shared_ptr<network::CloneNetworks> networks_;
  PoolNetworkOptions options_;
  JailIds slots_;  // the same free-list as jail ids, over the slots 0..N-1
};

}  // namespace dsec::pool

// Firecracker's MMDS configuration (PUT /mmds/config, a --config-file's "mmds-config"):
// which network interfaces answer for the metadata service, at which IPv4 address, with
// which version's rules. `service` is the VMM's data store, shared with the API (PUT and
// PATCH /mmds reach the guest at once).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vmm/mmds/mmds.h"

namespace dsec::mmds {

using Ipv4Address = std::array<uint8_t, 4>;

inline constexpr Ipv4Address kDefaultIpv4Address{169, 254, 169, 254};

struct MmdsConfig {
  MmdsVersion version = MmdsVersion::kV1;
  std::vector<std::string> network_interfaces;  // iface_ids, each an interface of the VM
  Ipv4Address ipv4_address = kDefaultIpv4Address;
  bool imds_compat = false;
  std::shared_ptr<Mmds> service{};

  bool operator==(const MmdsConfig&) const = default;
};

}  // namespace dsec::mmds

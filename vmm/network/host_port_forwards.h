// Host ports forwarded to clones' guests (docs/network.md, "Ports"): a TCP connection to a
// port of the host's own addresses is sent on (DNAT, in the host's namespace) to a clone's
// namespace veth address, where the clone's own NAT sends it to the guest. Every forward is
// a rule of one table, `ip dsec_ports`, written whole at each change (one transaction);
// the table goes with the object, and a table a killed process left is replaced by the
// next one's first change or clear(). Connections to 127.0.0.1 are not forwarded (the
// kernel routes no loopback address elsewhere unless route_localnet is set).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "vmm/common/error.h"

namespace dsec::network {

inline constexpr const char* kPortsTable = "dsec_ports";

struct PortForward {
  std::string owner;         // the clone network's name
  uint32_t destination = 0;  // its namespace veth address (host byte order)
  uint16_t guest_port = 0;
};

class HostPortForwards {
 public:
  // Host ports first..last are handed out, the lowest free first.
  HostPortForwards(uint16_t first, uint16_t last) : first_(first), last_(last) {}
  HostPortForwards(const HostPortForwards&) = delete;
  HostPortForwards& operator=(const HostPortForwards&) = delete;
  // Removes the table.
  ~HostPortForwards();

  // A free host port forwarded to `destination`:`guest_port`; the same port again when
  // `owner` forwards that guest port already. A `host_port` other than 0 asks for that one
  // (a daemon started again forwards an adopted clone's ports where they were): refused
  // when it is outside first..last or another forward's.
  Result<uint16_t> add(const std::string& owner, uint32_t destination, uint16_t guest_port,
                       uint16_t host_port = 0);
  // Removes `owner`'s forwards.
  Status remove_owner(const std::string& owner);
  // Removes the table, whoever made it.
  static Status clear();

 private:
  Status write() const;

  uint16_t first_;
  uint16_t last_;
  std::map<uint16_t, PortForward> forwards_;  // by host port
};

}  // namespace dsec::network

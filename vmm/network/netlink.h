// The routing netlink requests a clone's network needs (rtnetlink(7)), through libmnl: links
// (a veth pair, up, delete), IPv4 addresses and a default route. A Netlink speaks for the
// network namespace of the thread that opened it, wherever it is used from.
#pragma once

#include <libmnl/libmnl.h>
#include <linux/if_link.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/devices/virtio/net/tap.h"

namespace dsec::network {

using virtio::Ipv4Cidr;

class Netlink {
 public:
  // A NETLINK_ROUTE socket in the calling thread's network namespace.
  static Result<Netlink> open();

  // The interface's index, or nothing when no link of that name exists.
  Result<std::optional<int>> link_index(const std::string& name);
  // A veth pair: `name` here, `peer` made directly in the namespace `peer_netns_fd`.
  Status add_veth(const std::string& name, const std::string& peer, int peer_netns_fd);
  Status set_up(const std::string& name);
  Status add_address(const std::string& name, Ipv4Cidr address);
  Status add_default_route(uint32_t gateway);
  // Deletes the link (a veth's peer goes with it); a missing link is no error.
  Status delete_link(const std::string& name);
  // The link's counters (IFLA_STATS64), or nothing when no link of that name exists.
  Result<std::optional<rtnl_link_stats64>> link_stats(const std::string& name);
  // Every IPv4 address of this namespace, as /32s.
  Result<std::vector<Ipv4Cidr>> ipv4_addresses();

 private:
  struct SocketCloser {
    void operator()(mnl_socket* socket) const { mnl_socket_close(socket); }
  };
  explicit Netlink(mnl_socket* socket);

  // Sends the request in buffer_ and reads the kernel's answers up to its ack (or, for a
  // dump, its end), each handed to `callback`.
  Status exchange(const std::string& what, mnl_cb_t callback = nullptr, void* data = nullptr);
  nlmsghdr* start(uint16_t type, uint16_t flags);
  // A link request: its ifinfomsg, and the link named by IFLA_IFNAME.
  nlmsghdr* start_link(uint16_t type, uint16_t flags, const std::string& name);
  // RTM_GETLINK of `name`, its message handed to `callback`; false when no such link.
  Result<bool> get_link(const std::string& name, mnl_cb_t callback, void* data);

  std::unique_ptr<mnl_socket, SocketCloser> socket_;
  uint32_t port_id_ = 0;
  uint32_t sequence_ = 0;
  std::vector<char> buffer_;
};

}  // namespace dsec::network

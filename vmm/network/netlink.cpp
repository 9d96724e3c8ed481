#include "vmm/network/netlink.h"

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace dsec::network {
namespace {

constexpr uint16_t kCreate = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;

int collect_local_address(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == IFA_LOCAL && mnl_attr_get_payload_len(attr) == 4) {
    static_cast<std::vector<Ipv4Cidr>*>(data)->push_back(
        {.address = ntohl(mnl_attr_get_u32(attr)), .prefix = 32});
  }
  return MNL_CB_OK;
}

int collect_ipv4(const nlmsghdr* message, void* data) {
  const auto* ifa = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(message));
  if (ifa->ifa_family != AF_INET) {
    return MNL_CB_OK;
  }
  return mnl_attr_parse(message, sizeof(*ifa), collect_local_address, data);
}

int read_stats_attribute(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == IFLA_STATS64 &&
      mnl_attr_get_payload_len(attr) >= sizeof(rtnl_link_stats64)) {
    std::memcpy(data, mnl_attr_get_payload(attr), sizeof(rtnl_link_stats64));
  }
  return MNL_CB_OK;
}

int read_stats(const nlmsghdr* message, void* data) {
  return mnl_attr_parse(message, sizeof(ifinfomsg), read_stats_attribute, data);
}

int read_index(const nlmsghdr* message, void* data) {
  *static_cast<int*>(data) =
      static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(message))->ifi_index;
  return MNL_CB_OK;
}

}  // namespace

// A dump's parts are as large as the reader's buffer lets the kernel make them: room for
// 32 KiB (libmnl's MNL_SOCKET_DUMP_SIZE in later versions), so that none is cut short.
constexpr size_t kBufferSize = 32768;

Netlink::Netlink(mnl_socket* socket) : socket_(socket), buffer_(kBufferSize) {
  port_id_ = mnl_socket_get_portid(socket);
}

Result<Netlink> Netlink::open() {
  mnl_socket* socket = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (socket == nullptr) {
    return fail_errno("netlink: socket(NETLINK_ROUTE)", errno);
  }
  Netlink netlink(socket);
  if (mnl_socket_bind(socket, 0, MNL_SOCKET_AUTOPID) != 0) {
    return fail_errno("netlink: bind", errno);
  }
  netlink.port_id_ = mnl_socket_get_portid(socket);
  return netlink;
}

nlmsghdr* Netlink::start(uint16_t type, uint16_t flags) {
  nlmsghdr* message = mnl_nlmsg_put_header(buffer_.data());
  message->nlmsg_type = type;
  message->nlmsg_flags = flags;
  message->nlmsg_seq = ++sequence_;
  return message;
}

Status Netlink::exchange(const std::string& what, mnl_cb_t callback, void* data) {
  const auto* request = reinterpret_cast<const nlmsghdr*>(buffer_.data());
  if (mnl_socket_sendto(socket_.get(), request, request->nlmsg_len) < 0) {
    return fail_errno("netlink: " + what + ": send", errno);
  }
  const uint32_t sequence = request->nlmsg_seq;
  for (;;) {
    const ssize_t got = mnl_socket_recvfrom(socket_.get(), buffer_.data(), buffer_.size());
    if (got < 0) {
      return fail_errno("netlink: " + what + ": receive", errno);
    }
    // MNL_CB_STOP (0) at the ack or the dump's end; -1 with errno for the kernel's error.
    const int state =
        mnl_cb_run(buffer_.data(), static_cast<size_t>(got), sequence, port_id_, callback, data);
    if (state < 0) {
      return fail_errno("netlink: " + what, errno, errno == EPERM ? "needs CAP_NET_ADMIN" : "");
    }
    if (state == MNL_CB_STOP) {
      return ok();
    }
  }
}

nlmsghdr* Netlink::start_link(uint16_t type, uint16_t flags, const std::string& name) {
  nlmsghdr* message = start(type, flags);
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(message, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(message, IFLA_IFNAME, name.c_str());
  return message;
}

Result<bool> Netlink::get_link(const std::string& name, mnl_cb_t callback, void* data) {
  // With NLM_F_ACK the link's message comes, then the ack.
  start_link(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, name);
  auto found = exchange("looking up link " + name, callback, data);
  if (!found) {
    if (found.error().os_errno() == ENODEV) {
      return false;
    }
    return std::unexpected(found.error());
  }
  return true;
}

Result<std::optional<int>> Netlink::link_index(const std::string& name) {
  int index = 0;
  if (!DSEC_TRY(get_link(name, read_index, &index))) {
    return std::nullopt;
  }
  return index;
}

Result<std::optional<rtnl_link_stats64>> Netlink::link_stats(const std::string& name) {
  rtnl_link_stats64 stats{};
  if (!DSEC_TRY(get_link(name, read_stats, &stats))) {
    return std::nullopt;
  }
  return stats;
}

Status Netlink::add_veth(const std::string& name, const std::string& peer, int peer_netns_fd) {
  nlmsghdr* message = start_link(RTM_NEWLINK, kCreate, name);
  nlattr* link_info = mnl_attr_nest_start(message, IFLA_LINKINFO);
  mnl_attr_put_strz(message, IFLA_INFO_KIND, "veth");
  nlattr* info_data = mnl_attr_nest_start(message, IFLA_INFO_DATA);
  nlattr* peer_info = mnl_attr_nest_start(message, VETH_INFO_PEER);
  // VETH_INFO_PEER holds an ifinfomsg of its own, then the peer's attributes.
  auto* peer_ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(message, sizeof(ifinfomsg)));
  peer_ifi->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(message, IFLA_IFNAME, peer.c_str());
  mnl_attr_put_u32(message, IFLA_NET_NS_FD, static_cast<uint32_t>(peer_netns_fd));
  mnl_attr_nest_end(message, peer_info);
  mnl_attr_nest_end(message, info_data);
  mnl_attr_nest_end(message, link_info);
  return exchange("making the veth pair " + name + " / " + peer);
}

Status Netlink::set_up(const std::string& name) {
  nlmsghdr* message = start_link(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, name);
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_get_payload(message));
  ifi->ifi_flags = IFF_UP;
  ifi->ifi_change = IFF_UP;
  return exchange("bringing " + name + " up");
}

Status Netlink::add_address(const std::string& name, Ipv4Cidr address) {
  const auto index = DSEC_TRY(link_index(name));
  if (!index) {
    return fail("netlink: no link " + name + " to address");
  }
  nlmsghdr* message = start(RTM_NEWADDR, kCreate);
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(message, sizeof(ifaddrmsg)));
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = address.prefix;
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = static_cast<uint32_t>(*index);
  mnl_attr_put_u32(message, IFA_LOCAL, htonl(address.address));
  mnl_attr_put_u32(message, IFA_ADDRESS, htonl(address.address));
  return exchange("adding an address to " + name);
}

Status Netlink::add_default_route(uint32_t gateway) {
  nlmsghdr* message = start(RTM_NEWROUTE, kCreate);
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(message, sizeof(rtmsg)));
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = 0;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_protocol = RTPROT_STATIC;
  rtm->rtm_scope = RT_SCOPE_UNIVERSE;
  rtm->rtm_type = RTN_UNICAST;
  mnl_attr_put_u32(message, RTA_GATEWAY, htonl(gateway));
  return exchange("adding the default route");
}

Status Netlink::delete_link(const std::string& name) {
  start_link(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK, name);
  auto deleted = exchange("deleting link " + name);
  if (!deleted && deleted.error().os_errno() == ENODEV) {
    return ok();
  }
  return deleted;
}

Result<std::vector<Ipv4Cidr>> Netlink::ipv4_addresses() {
  nlmsghdr* message = start(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP);
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(message, sizeof(ifaddrmsg)));
  ifa->ifa_family = AF_INET;
  std::vector<Ipv4Cidr> addresses;
  DSEC_TRY(exchange("listing the IPv4 addresses", collect_ipv4, &addresses));
  return addresses;
}

}  // namespace dsec::network

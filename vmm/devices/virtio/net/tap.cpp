#include "vmm/devices/virtio/net/tap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dsec::virtio {
namespace {

constexpr const char* kPrivilegeHint =
    "load the tun module (modprobe tun) and run with CAP_NET_ADMIN (or use a TAP that "
    "belongs to you)";

Status set_ipv4(int sock, const std::string& name, unsigned long request, uint32_t address,
                const char* what) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(address);
  std::memcpy(&ifr.ifr_addr, &sin, sizeof(sin));
  if (::ioctl(sock, request, &ifr) != 0) {
    return fail_errno("TAP " + name + ": setting the " + what, errno, "need CAP_NET_ADMIN");
  }
  return ok();
}

// The TAP is the host's side of an IPv4 link to the guest: without this, the host's kernel
// gives it an IPv6 link-local address (a host address the guest could reach past any IPv4
// rule) and sends the guest frames it never asked for (MLD reports, neighbour and router
// solicitations: six in the first two seconds in the test bed, filling the rx buffers of a
// guest that has few). A kernel without IPv6 has no such file, and nothing to turn off.
void disable_ipv6(const std::string& name) {
  const std::string path = "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6";
  const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) {
    return;
  }
  if (!fd || ::write(fd.get(), "1", 1) != 1) {
    spdlog::warn(
        "TAP {}: turning IPv6 off ({}): {}; the host's kernel will send the guest "
        "IPv6 link-local traffic",
        name, path, std::strerror(errno));
  }
}

// The header's size on the fd: struct virtio_net_hdr_v1, num_buffers included (12 bytes).
Status set_vnet_header_size(int fd, const std::string& what) {
  const int size = 12;
  if (::ioctl(fd, TUNSETVNETHDRSZ, &size) != 0) {
    return fail_errno(what + ": TUNSETVNETHDRSZ", errno);
  }
  return ok();
}

}  // namespace

Result<Ipv4Cidr> parse_ipv4_cidr(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) {
    return fail("'" + text + "' is not an IPv4 address with a prefix length", "write A.B.C.D/N");
  }
  const std::string address = text.substr(0, slash);
  const std::string prefix = text.substr(slash + 1);
  in_addr addr{};
  if (::inet_pton(AF_INET, address.c_str(), &addr) != 1) {
    return fail("'" + address + "' is not an IPv4 address", "write A.B.C.D/N");
  }
  if (prefix.empty() || prefix.size() > 2 ||
      prefix.find_first_not_of("0123456789") != std::string::npos || std::stoi(prefix) > 32) {
    return fail("'" + prefix + "' is not a prefix length", "give N from 0 to 32");
  }
  return Ipv4Cidr{.address = ntohl(addr.s_addr), .prefix = static_cast<uint8_t>(std::stoi(prefix))};
}

Result<Tap> Tap::open(const TapConfig& config) {
  if (config.handed_in_fd >= 0) {
    return adopt(config.handed_in_fd);
  }
  if (config.name.size() >= IFNAMSIZ) {
    return fail("TAP name '" + config.name + "' is longer than " + std::to_string(IFNAMSIZ - 1) +
                " bytes");
  }
  UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    return fail_errno("/dev/net/tun", errno, kPrivilegeHint);
  }
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  std::strncpy(ifr.ifr_name, config.name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) {
    return fail_errno(
        "/dev/net/tun: TUNSETIFF " + (config.name.empty() ? "(new TAP)" : config.name), errno,
        kPrivilegeHint);
  }
  std::string name(ifr.ifr_name, ::strnlen(ifr.ifr_name, IFNAMSIZ));
  DSEC_TRY(set_vnet_header_size(fd.get(), "TAP " + name));
  if (config.host_ip) {
    UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock) {
      return fail_errno("TAP " + name + ": socket(AF_INET)", errno);
    }
    const uint32_t mask =
        config.host_ip->prefix == 0 ? 0 : ~uint32_t{0} << (32 - config.host_ip->prefix);
    DSEC_TRY(set_ipv4(sock.get(), name, SIOCSIFADDR, config.host_ip->address, "address"));
    DSEC_TRY(set_ipv4(sock.get(), name, SIOCSIFNETMASK, mask, "netmask"));
    disable_ipv6(name);
    ifreq flags{};
    std::strncpy(flags.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(sock.get(), SIOCGIFFLAGS, &flags) != 0) {
      return fail_errno("TAP " + name + ": SIOCGIFFLAGS", errno);
    }
    flags.ifr_flags = static_cast<short>(flags.ifr_flags | IFF_UP);
    if (::ioctl(sock.get(), SIOCSIFFLAGS, &flags) != 0) {
      return fail_errno("TAP " + name + ": bringing it up", errno, "need CAP_NET_ADMIN");
    }
  }
  return Tap(std::move(fd), std::move(name), true);
}

Result<Tap> Tap::adopt(int fd) {
  const std::string what = "--net fd=" + std::to_string(fd);
  ifreq ifr{};
  if (::ioctl(fd, TUNGETIFF, &ifr) != 0) {
    return fail_errno(what + ": TUNGETIFF", errno,
                      "hand in a descriptor of /dev/net/tun attached to a TAP (TUNSETIFF)");
  }
  if ((ifr.ifr_flags & (IFF_TAP | IFF_TUN)) != IFF_TAP || (ifr.ifr_flags & IFF_NO_PI) == 0) {
    return fail(what + " is not a TAP without packet information",
                "attach it with IFF_TAP | IFF_NO_PI");
  }
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own) {
    return fail_errno(what + ": dup", errno);
  }
  const int flags = ::fcntl(own.get(), F_GETFL);
  if (flags < 0 || ::fcntl(own.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return fail_errno(what + ": O_NONBLOCK", errno);
  }
  const bool vnet_header = (ifr.ifr_flags & IFF_VNET_HDR) != 0;
  if (vnet_header) {
    DSEC_TRY(set_vnet_header_size(own.get(), what));
  }
  return Tap(std::move(own), std::string(ifr.ifr_name, ::strnlen(ifr.ifr_name, IFNAMSIZ)),
             vnet_header);
}

Status Tap::set_offloads(int fd, unsigned tun_flags) {
  if (::ioctl(fd, TUNSETOFFLOAD, static_cast<unsigned long>(tun_flags)) != 0) {
    return fail_errno("TAP: TUNSETOFFLOAD " + std::to_string(tun_flags), errno);
  }
  return ok();
}

}  // namespace dsec::virtio

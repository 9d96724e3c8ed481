// vmm/network: a clone's network namespace, its TAP, veth pair, addresses, route, NAT and
// egress filter, made and removed for real. Needs root (namespaces, links, nf_tables; no
// `ip` or `nft` binary): each test runs in a network namespace of its own that stands for
// the host, so nothing reaches the real host's.
#include "vmm/network/clone_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/open_fds.h"
#include "tests/support/outside_network.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/network/namespace_thread.h"
#include "vmm/network/netlink.h"
#include "vmm/network/nftables.h"

namespace dsec::network {
namespace {

constexpr uint32_t kGateway = 0xC0A8F101;  // 192.168.241.1, the TAP's
constexpr uint32_t kGuest = 0xC0A8F102;    // 192.168.241.2
constexpr long kNsfsMagic = 0x6e736673;

CloneNetworkConfig config_of(const std::string& name, const std::string& run_dir, uint32_t slot) {
  return {.name = name,
          .run_dir = run_dir,
          .tap_name = "tap0",
          .tap_address = {.address = kGateway, .prefix = 29},
          .guest_address = kGuest,
          .clone_range = {.address = 0x0AC80000, .prefix = 16},  // 10.200.0.0/16
          .slot = slot,
          .egress = {},
          .reserved = {}};
}

// Each interface of the namespace `fd`: its IPv4 address ("" if none) and whether it is up.
struct Interface {
  std::string address;
  bool up = false;
};
std::map<std::string, Interface> interfaces_in(int fd) {
  std::map<std::string, Interface> found;
  auto listed = in_namespace(fd, [&]() -> Status {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) {
      return fail_errno("getifaddrs", errno);
    }
    for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
      auto& interface = found[entry->ifa_name];
      interface.up = (entry->ifa_flags & IFF_UP) != 0;
      if (entry->ifa_addr != nullptr && entry->ifa_addr->sa_family == AF_INET) {
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, text,
                    sizeof(text));
        interface.address = text;
      }
    }
    ::freeifaddrs(list);
    return ok();
  });
  EXPECT_TRUE(listed.has_value()) << listed.error().message();
  return found;
}

std::string routes_in(int fd) {
  std::string text;
  (void)in_namespace(fd, [&]() -> Status {
    std::ifstream in("/proc/thread-self/net/route");
    std::stringstream all;
    all << in.rdbuf();
    text = all.str();
    return ok();
  });
  return text;
}

std::optional<int> link_in(int fd, const std::string& name) {
  auto index = in_namespace(fd, [&]() -> Result<std::optional<int>> {
    auto netlink = DSEC_TRY(Netlink::open());
    return netlink.link_index(name);
  });
  EXPECT_TRUE(index.has_value()) << index.error().message();
  return index.value_or(std::nullopt);
}

// The guest's side of the TAP tap0 in the namespace `netns`, for tests without a VM:
// frames written here go through the namespace as a guest's packets do, NAT and filter
// included.
class FakeGuest {
 public:
  explicit FakeGuest(int netns) {
    auto attached = in_namespace(netns, [&]() -> Status {
      tap_.reset(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
      ifreq ifr{};
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
      std::strncpy(ifr.ifr_name, "tap0", IFNAMSIZ - 1);
      if (!tap_ || ::ioctl(tap_.get(), TUNSETIFF, &ifr) != 0) {
        return fail_errno("attaching to tap0", errno);
      }
      UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      ifreq hw{};
      std::strncpy(hw.ifr_name, "tap0", IFNAMSIZ - 1);
      if (!sock || ::ioctl(sock.get(), SIOCGIFHWADDR, &hw) != 0) {
        return fail_errno("tap0's MAC", errno);
      }
      std::memcpy(tap_mac_, hw.ifr_hwaddr.sa_data, 6);
      return ok();
    });
    EXPECT_TRUE(attached.has_value()) << attached.error().message();
  }

  // One UDP datagram from 192.168.241.2:40000 (the guest's MAC) to the TAP's MAC.
  Status send(uint32_t to, uint16_t port, const std::string& payload) const {
    std::vector<uint8_t> frame(14 + 20 + 8 + payload.size());
    const auto put16 = [&](size_t at, uint16_t v) {
      frame[at] = static_cast<uint8_t>(v >> 8);
      frame[at + 1] = static_cast<uint8_t>(v);
    };
    const auto put32 = [&](size_t at, uint32_t v) {
      put16(at, static_cast<uint16_t>(v >> 16));
      put16(at + 2, static_cast<uint16_t>(v));
    };
    std::memcpy(frame.data(), tap_mac_, 6);
    const uint8_t guest_mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
    std::memcpy(frame.data() + 6, guest_mac, 6);
    put16(12, 0x0800);
    frame[14] = 0x45;  // IPv4, 20-byte header
    put16(16, static_cast<uint16_t>(20 + 8 + payload.size()));
    put16(20, 0x4000);  // don't fragment
    frame[22] = 64;     // TTL
    frame[23] = 17;     // UDP
    put32(26, kGuest);
    put32(30, to);
    uint32_t sum = 0;
    for (size_t i = 14; i < 34; i += 2) sum += (uint32_t{frame[i]} << 8) | frame[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    put16(24, static_cast<uint16_t>(~sum));
    put16(34, 40000);
    put16(36, port);
    put16(38, static_cast<uint16_t>(8 + payload.size()));  // the UDP checksum stays 0: none
    std::memcpy(frame.data() + 42, payload.data(), payload.size());
    if (::write(tap_.get(), frame.data(), frame.size()) != static_cast<ssize_t>(frame.size())) {
      return fail_errno("writing into tap0", errno);
    }
    return ok();
  }

  // Waits up to 5 s for the namespace to ask for the guest's MAC (an ARP request for
  // 192.168.241.2): what it does with the first packet it sends to the guest, once that
  // packet went through the filter and conntrack.
  bool wait_for_arp_request() const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    uint8_t frame[2048];
    while (std::chrono::steady_clock::now() < end) {
      pollfd pfd{.fd = tap_.get(), .events = POLLIN, .revents = 0};
      if (::poll(&pfd, 1, 100) != 1) continue;
      const ssize_t got = ::read(tap_.get(), frame, sizeof(frame));
      // Ethernet type 0x0806, ARP operation 1 (request), target IPv4 address at 38.
      if (got >= 42 && frame[12] == 0x08 && frame[13] == 0x06 && frame[21] == 1 &&
          frame[38] == 192 && frame[39] == 168 && frame[40] == 241 && frame[41] == 2) {
        return true;
      }
    }
    return false;
  }

 private:
  UniqueFd tap_;
  uint8_t tap_mac_[6] = {};
};

// A UDP socket on ADDRESS:PORT in the namespace `netns`.
UniqueFd udp_socket(int netns, uint32_t address, uint16_t port) {
  auto made = in_namespace(netns, [&]() -> Result<UniqueFd> {
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in sin{.sin_family = AF_INET,
                    .sin_port = htons(port),
                    .sin_addr = {htonl(address)},
                    .sin_zero = {}};
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) {
      return fail_errno("a UDP socket", errno);
    }
    return fd;
  });
  EXPECT_TRUE(made.has_value()) << made.error().message();
  return made ? std::move(*made) : UniqueFd();
}

// The next datagram `fd` receives within 5 s, as "SOURCE-ADDRESS PAYLOAD" ("" if none).
std::string next_datagram(int fd) {
  pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
  if (::poll(&pfd, 1, 5000) != 1) {
    return "";
  }
  char buffer[256];
  sockaddr_in from{};
  socklen_t length = sizeof(from);
  const ssize_t got =
      ::recvfrom(fd, buffer, sizeof(buffer), 0, reinterpret_cast<sockaddr*>(&from), &length);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &from.sin_addr, text, sizeof(text));
  return std::string(text) + " " + std::string(buffer, got > 0 ? static_cast<size_t>(got) : 0);
}

class CloneNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0) << "the clone network tests need root (network namespaces, "
                                 "links, nf_tables)";
    ASSERT_OK_AND_ASSIGN(outer_, current_network_namespace());
    // This thread's namespace stands for the host's from here on.
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0) << std::strerror(errno);
    ASSERT_OK_AND_ASSIGN(host_, current_network_namespace());
  }
  void TearDown() override {
    if (outer_) {
      EXPECT_EQ(::setns(outer_.get(), CLONE_NEWNET), 0) << std::strerror(errno);
    }
  }

  UniqueFd outer_;
  UniqueFd host_;
  test::TempDir run_dir_;
};

TEST_F(CloneNetworkTest, MakesANamespaceWithTheTapAVethPairTheirAddressesAndADefaultRoute) {
  ASSERT_OK_AND_ASSIGN(auto network, CloneNetwork::make(config_of("c1", run_dir_.path(), 1)));

  // Bind-mounted by name: the very namespace the CloneNetwork holds.
  const std::string path = (run_dir_.path() / "c1").string();
  EXPECT_EQ(network.namespace_path(), path);
  struct statfs fs {};
  ASSERT_EQ(::statfs(path.c_str(), &fs), 0) << std::strerror(errno);
  EXPECT_EQ(fs.f_type, kNsfsMagic);
  struct stat mounted = {};
  struct stat held = {};
  struct stat host = {};
  ASSERT_EQ(::stat(path.c_str(), &mounted), 0);
  ASSERT_EQ(::fstat(network.namespace_fd(), &held), 0);
  ASSERT_EQ(::fstat(host_.get(), &host), 0);
  EXPECT_EQ(mounted.st_ino, held.st_ino);
  EXPECT_NE(held.st_ino, host.st_ino);

  // Slot 1 of 10.200.0.0/16: the host's end 10.200.0.5/30, the namespace's 10.200.0.6.
  const auto inside = interfaces_in(network.namespace_fd());
  ASSERT_TRUE(inside.contains("tap0")) << "no TAP tap0 in the namespace";
  EXPECT_EQ(inside.at("tap0").address, "192.168.241.1");
  EXPECT_TRUE(inside.at("tap0").up);
  ASSERT_TRUE(inside.contains("veth0"));
  EXPECT_EQ(inside.at("veth0").address, "10.200.0.6");
  EXPECT_TRUE(inside.at("veth0").up);
  const auto outside = interfaces_in(host_.get());
  ASSERT_TRUE(outside.contains("vh-c1")) << "no host veth end vh-c1";
  EXPECT_EQ(outside.at("vh-c1").address, "10.200.0.5");
  EXPECT_TRUE(outside.at("vh-c1").up);
  EXPECT_FALSE(outside.contains("tap0")) << "the TAP leaked into the host's namespace";
  // /proc/net/route: the default route (destination 0) through 10.200.0.5, little-endian hex.
  EXPECT_NE(routes_in(network.namespace_fd()).find("veth0\t00000000\t0500C80A"), std::string::npos)
      << routes_in(network.namespace_fd());
}

TEST_F(CloneNetworkTest, ClonesOfOneSnapshotKeepTheSameTapAndGuestAddressSideBySide) {
  ASSERT_OK_AND_ASSIGN(auto first, CloneNetwork::make(config_of("c1", run_dir_.path(), 0)));
  ASSERT_OK_AND_ASSIGN(auto second, CloneNetwork::make(config_of("c2", run_dir_.path(), 1)));
  EXPECT_EQ(interfaces_in(first.namespace_fd()).at("tap0").address, "192.168.241.1");
  EXPECT_EQ(interfaces_in(second.namespace_fd()).at("tap0").address, "192.168.241.1");
  EXPECT_EQ(second.namespace_veth_address() - first.namespace_veth_address(), 4U);
  // A second network of a name in use is refused, and leaves the first one as it was.
  auto again = CloneNetwork::make(config_of("c1", run_dir_.path(), 2));
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message().find("exists"), std::string::npos) << again.error().message();
  EXPECT_TRUE(link_in(host_.get(), "vh-c1").has_value());
  EXPECT_TRUE(std::filesystem::exists(run_dir_.path() / "c1"));
}

TEST_F(CloneNetworkTest, TheNatAndAFilterThatLetsNothingOutByDefaultAreInTheNamespace) {
  auto config = config_of("c1", run_dir_.path(), 1);
  config.reserved = {{.address = 0xC6120000, .prefix = 15}};  // 198.18.0.0/15
  {
    // An address of the host's, elsewhere than on the veth.
    ASSERT_OK_AND_ASSIGN(auto netlink, Netlink::open());
    ASSERT_OK(netlink.add_address("lo", {.address = 0xAC1F0901, .prefix = 24}));  // 172.31.9.1
  }
  ASSERT_OK_AND_ASSIGN(auto network, CloneNetwork::make(config));
  ASSERT_OK_AND_ASSIGN(const std::string rules, network.ruleset());
  // Out as the namespace's veth address, and back in to the guest.
  EXPECT_NE(rules.find("oifname \"veth0\" ip saddr 192.168.241.2 snat to 10.200.0.6"),
            std::string::npos)
      << rules;
  EXPECT_NE(rules.find("iifname \"veth0\" ip daddr 10.200.0.6 dnat to 192.168.241.2"),
            std::string::npos)
      << rules;
  // Egress none: the forward chain drops, and nothing from the TAP is accepted.
  EXPECT_NE(rules.find("hook forward priority filter; policy drop;"), std::string::npos) << rules;
  // Every packet of the guest's own connections is judged, not only the first: no blanket
  // "established" accept in the forward chain, only the guest's answers to connections made
  // to it.
  EXPECT_NE(rules.find("iifname \"tap0\" ct direction reply accept"), std::string::npos) << rules;
  const auto forward = rules.substr(rules.find("chain forward"));
  EXPECT_EQ(forward.substr(0, forward.find("chain input")).find("ct state established"),
            std::string::npos)
      << rules;
  EXPECT_EQ(rules.find("iifname \"tap0\" oifname \"veth0\" accept"), std::string::npos) << rules;
  EXPECT_EQ(rules.find("iifname \"tap0\" ip daddr 0.0.0.0/0 accept"), std::string::npos) << rules;
  // The reserved ranges: link-local, the clone range, the host's addresses (here the host's
  // veth end), the caller's.
  for (const char* reserved : {"169.254.0.0/16", "10.200.0.0/16", "198.18.0.0/15", "172.31.9.1"}) {
    EXPECT_NE(rules.find(reserved), std::string::npos) << reserved << " not reserved:\n" << rules;
  }
  EXPECT_NE(rules.find("ip daddr @reserved counter name \"dropped\" drop"), std::string::npos)
      << rules;
}

TEST_F(CloneNetworkTest, AGuestsPacketsLeaveAsTheNamespaceOnlyWhereTheEgressPolicySays) {
  ASSERT_OK_AND_ASSIGN(auto clone, CloneNetwork::make(config_of("c1", run_dir_.path(), 0)));
  test::Outside outside(0x0AC90002, "do-c1");  // 10.201.0.2, beyond the host
  const FakeGuest guest(clone.namespace_fd());
  const uint32_t host = clone.host_veth_address();  // 10.200.0.1, the host's own
  const auto beyond_9000 = udp_socket(outside.netns(), 0x0AC90002, 9000);
  const auto beyond_9001 = udp_socket(outside.netns(), 0x0AC90002, 9001);
  const auto host_9000 = udp_socket(host_.get(), host, 9000);
  ASSERT_TRUE(beyond_9000 && beyond_9001 && host_9000);
  // Each socket's first datagram names the first packet let through to it: those sent
  // before it, through the same TAP, were refused.
  ASSERT_OK(guest.send(0x0AC90002, 9000, "none"));  // egress none: nothing leaves
  ASSERT_OK(guest.send(host, 9000, "none"));

  ASSERT_OK_AND_ASSIGN(auto port_9000, parse_egress_rule("10.201.0.0/24:9000"));
  ASSERT_OK(clone.set_egress({.mode = EgressPolicy::Mode::kAllowList, .allow = {port_9000}}));
  ASSERT_OK(guest.send(0x0AC90002, 9001, "allow-list, another port"));
  ASSERT_OK(guest.send(host, 9000, "allow-list, the host"));
  ASSERT_OK(guest.send(0x0AC90002, 9000, "allow-list"));
  // Out as the namespace's veth address, whatever the guest's.
  EXPECT_EQ(next_datagram(beyond_9000.get()), "10.200.0.2 allow-list");

  ASSERT_OK(clone.set_egress({.mode = EgressPolicy::Mode::kAll}));
  ASSERT_OK(guest.send(host, 9000, "all, the host"));
  ASSERT_OK_AND_ASSIGN(auto host_port, parse_egress_rule("10.200.0.1/32:9000"));
  ASSERT_OK_AND_ASSIGN(auto denied, parse_egress_rule("10.200.0.0/16"));
  ASSERT_OK(clone.set_egress(
      {.mode = EgressPolicy::Mode::kAll, .deny = {denied}, .reserved_allow = {host_port}}));
  ASSERT_OK(guest.send(host, 9000, "denied, though allowed by name"));
  ASSERT_OK_AND_ASSIGN(auto other_port, parse_egress_rule("10.201.0.0/24:9001"));
  ASSERT_OK(clone.set_egress(
      {.mode = EgressPolicy::Mode::kAll, .deny = {other_port}, .reserved_allow = {host_port}}));
  ASSERT_OK(guest.send(0x0AC90002, 9001, "all, a denied port"));
  ASSERT_OK(guest.send(host, 9000, "allowed by name"));
  EXPECT_EQ(next_datagram(host_9000.get()), "10.200.0.2 allowed by name");

  ASSERT_OK(clone.set_egress({.mode = EgressPolicy::Mode::kAll}));
  ASSERT_OK(guest.send(0x0AC90002, 9001, "all"));
  EXPECT_EQ(next_datagram(beyond_9001.get()), "10.200.0.2 all");

  // Seven refused across six rule sets, each counted once; three let through, at least.
  ASSERT_OK_AND_ASSIGN(const auto counted, clone.counters());
  EXPECT_EQ(counted.dropped_packets, 7U);
  EXPECT_GE(counted.sent_packets, 3U);
  EXPECT_GE(counted.sent_bytes, 3U * (20 + 8 + 3));
}

TEST_F(CloneNetworkTest, AChangedPolicyStopsAConnectionAlreadyUpNotOnlyNewOnes) {
  auto config = config_of("c1", run_dir_.path(), 0);
  config.egress.mode = EgressPolicy::Mode::kAll;
  ASSERT_OK_AND_ASSIGN(auto clone, CloneNetwork::make(config));
  test::Outside outside(0x0AC90002, "do-c1");
  const FakeGuest guest(clone.namespace_fd());
  const auto beyond = udp_socket(outside.netns(), 0x0AC90002, 9000);
  ASSERT_TRUE(beyond);
  ASSERT_OK(guest.send(0x0AC90002, 9000, "first"));
  ASSERT_EQ(next_datagram(beyond.get()), "10.200.0.2 first");
  // An answer makes the connection established in conntrack's eyes.
  sockaddr_in to{.sin_family = AF_INET,
                 .sin_port = htons(40000),
                 .sin_addr = {htonl(0x0AC80002)},
                 .sin_zero = {}};
  ASSERT_EQ(::sendto(beyond.get(), "answer", 6, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 6)
      << std::strerror(errno);
  ASSERT_TRUE(guest.wait_for_arp_request()) << "the answer never came back towards the guest";

  ASSERT_OK(clone.set_egress({}));
  ASSERT_OK(guest.send(0x0AC90002, 9000, "after none"));
  ASSERT_OK(clone.set_egress({.mode = EgressPolicy::Mode::kAll}));
  ASSERT_OK(guest.send(0x0AC90002, 9000, "all again"));
  EXPECT_EQ(next_datagram(beyond.get()), "10.200.0.2 all again");
}

// A resolver named by the policy is reached on port 53 whatever the mode, and on no other
// port; one on the host's own address only where reserved_allow names it too.
TEST_F(CloneNetworkTest, AResolverIsReachedOnPort53AloneWhateverTheMode) {
  ASSERT_OK_AND_ASSIGN(auto clone, CloneNetwork::make(config_of("c1", run_dir_.path(), 0)));
  test::Outside outside(0x0AC90002, "do-c1");
  const FakeGuest guest(clone.namespace_fd());
  const uint32_t host = clone.host_veth_address();
  const auto dns = udp_socket(outside.netns(), 0x0AC90002, 53);
  const auto other = udp_socket(outside.netns(), 0x0AC90002, 54);
  const auto host_dns = udp_socket(host_.get(), host, 53);
  ASSERT_TRUE(dns && other && host_dns);
  ASSERT_OK(clone.set_egress({.resolver = 0x0AC90002}));  // mode none
  ASSERT_OK_AND_ASSIGN(const std::string rules, clone.ruleset());
  EXPECT_NE(rules.find("iifname \"tap0\" ip daddr 10.201.0.2 meta l4proto { tcp, udp } th dport "
                       "53 accept"),
            std::string::npos)
      << rules;
  ASSERT_OK(guest.send(0x0AC90002, 54, "another port"));
  ASSERT_OK(guest.send(0x0AC90002, 53, "query"));
  EXPECT_EQ(next_datagram(dns.get()), "10.200.0.2 query");

  ASSERT_OK(clone.set_egress({.resolver = host}));  // reserved: not by this alone
  ASSERT_OK(guest.send(host, 53, "host, not named"));
  ASSERT_OK_AND_ASSIGN(auto host_53, parse_egress_rule("10.200.0.1/32:53"));
  ASSERT_OK(clone.set_egress({.reserved_allow = {host_53}, .resolver = host}));
  ASSERT_OK(guest.send(host, 53, "host, named"));
  EXPECT_EQ(next_datagram(host_dns.get()), "10.200.0.2 host, named");
  ASSERT_OK(clone.set_egress({.mode = EgressPolicy::Mode::kAll,
                              .deny = {{.destination = {.address = 0x0AC90002, .prefix = 32}}},
                              .resolver = 0x0AC90002}));
  ASSERT_OK(guest.send(0x0AC90002, 53, "denied"));
  ASSERT_OK(clone.set_egress({.resolver = 0x0AC90002}));
  ASSERT_OK(guest.send(0x0AC90002, 53, "again"));
  EXPECT_EQ(next_datagram(dns.get()), "10.200.0.2 again");
  ASSERT_OK_AND_ASSIGN(const auto counted, clone.counters());
  EXPECT_EQ(counted.dropped_packets, 3U);
  EXPECT_EQ(clone.config().egress.resolver, 0x0AC90002U);
}

TEST_F(CloneNetworkTest, EgressIsReplacedWhileItRunsAndABadPolicyLeavesTheOldOne) {
  ASSERT_OK_AND_ASSIGN(auto network, CloneNetwork::make(config_of("c1", run_dir_.path(), 0)));
  ASSERT_OK(network.set_egress({.mode = EgressPolicy::Mode::kAll}));
  ASSERT_OK_AND_ASSIGN(std::string rules, network.ruleset());
  EXPECT_NE(rules.find("iifname \"tap0\" oifname \"veth0\" accept"), std::string::npos) << rules;

  ASSERT_OK_AND_ASSIGN(auto https, parse_egress_rule("10.1.0.0/16:443"));
  ASSERT_OK_AND_ASSIGN(auto denied, parse_egress_rule("10.1.2.0/24"));
  ASSERT_OK(network.set_egress(
      {.mode = EgressPolicy::Mode::kAllowList, .allow = {https}, .deny = {denied}}));
  ASSERT_OK_AND_ASSIGN(rules, network.ruleset());
  EXPECT_EQ(rules.find("iifname \"tap0\" oifname \"veth0\" accept"), std::string::npos) << rules;
  const auto allow_at = rules.find(
      "iifname \"tap0\" ip daddr 10.1.0.0/16 meta l4proto { tcp, udp } th dport 443 accept");
  const auto deny_at =
      rules.find("iifname \"tap0\" ip daddr 10.1.2.0/24 counter name \"dropped\" drop");
  ASSERT_NE(allow_at, std::string::npos) << rules;
  ASSERT_NE(deny_at, std::string::npos) << rules;
  EXPECT_LT(deny_at, allow_at) << "the deny list must come first: it wins";
  // One egress table, not one per change.
  EXPECT_EQ(rules.find("table inet dsec_egress"), rules.rfind("table inet dsec_egress")) << rules;

  const EgressRule host_bits{.destination = {.address = 0x0A010203, .prefix = 16}};
  EXPECT_FALSE(network.set_egress({.mode = EgressPolicy::Mode::kAllowList, .allow = {host_bits}}));
  ASSERT_OK_AND_ASSIGN(const std::string after, network.ruleset());
  EXPECT_EQ(after, rules);
  EXPECT_EQ(network.config().egress.allow, std::vector<EgressRule>{https});
}

TEST_F(CloneNetworkTest, DestructionRemovesTheLinksTheRulesAndTheMountEvenWhileHeld) {
  const size_t fds_before = test::open_fd_count();
  UniqueFd still_held;
  {
    ASSERT_OK_AND_ASSIGN(auto network, CloneNetwork::make(config_of("c1", run_dir_.path(), 0)));
    // A VMM that has not exited yet holds the namespace: stand in for it.
    still_held.reset(::dup(network.namespace_fd()));
  }
  EXPECT_FALSE(std::filesystem::exists(run_dir_.path() / "c1"));
  EXPECT_FALSE(link_in(host_.get(), "vh-c1").has_value());
  EXPECT_FALSE(link_in(still_held.get(), "tap0").has_value());
  EXPECT_FALSE(link_in(still_held.get(), "veth0").has_value());
  auto rules = in_namespace(still_held.get(), []() -> Result<std::string> {
    auto nft = DSEC_TRY(Nftables::open());
    return nft.run("list ruleset\n");
  });
  ASSERT_OK(rules);
  EXPECT_EQ(*rules, "");
  still_held.reset();
  EXPECT_EQ(test::open_fd_count(), fds_before);
}

TEST_F(CloneNetworkTest, RemoveStaleCleansWhatAKilledProcessLeft) {
  // A process that made a clone network and died without destroying it.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto network = CloneNetwork::make(config_of("c1", run_dir_.path(), 0));
    if (!network) {
      ::_exit(1);
    }
    ::_exit(0);  // no destructor runs
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(std::filesystem::exists(run_dir_.path() / "c1"));
  ASSERT_TRUE(link_in(host_.get(), "vh-c1").has_value());
  EXPECT_FALSE(CloneNetwork::make(config_of("c1", run_dir_.path(), 0)).has_value());

  ASSERT_OK(CloneNetwork::remove_stale("c1", run_dir_.path()));
  EXPECT_FALSE(std::filesystem::exists(run_dir_.path() / "c1"));
  EXPECT_FALSE(link_in(host_.get(), "vh-c1").has_value());
  ASSERT_OK(CloneNetwork::remove_stale("c1", run_dir_.path()));  // nothing left: no error
  ASSERT_OK_AND_ASSIGN(auto again, CloneNetwork::make(config_of("c1", run_dir_.path(), 0)));
  EXPECT_TRUE(link_in(again.namespace_fd(), "tap0").has_value());
}

TEST_F(CloneNetworkTest, AProcessStartedAgainAdoptsWhatItsPredecessorLeftAndRemovesIt) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(CloneNetwork::make(config_of("c1", run_dir_.path(), 3)).has_value() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // A name that was never made is refused, and leaves nothing.
  EXPECT_FALSE(CloneNetwork::adopt(config_of("c9", run_dir_.path(), 4)).has_value());

  auto config = config_of("c1", run_dir_.path(), 3);
  config.egress.mode = EgressPolicy::Mode::kAll;
  {
    ASSERT_OK_AND_ASSIGN(auto adopted, CloneNetwork::adopt(config));
    EXPECT_EQ(interfaces_in(adopted.namespace_fd()).at("veth0").address, "10.200.0.14");
    ASSERT_OK_AND_ASSIGN(const std::string rules, adopted.ruleset());
    EXPECT_NE(rules.find("iifname \"tap0\" oifname \"veth0\" accept"), std::string::npos) << rules;
    EXPECT_NE(rules.find("snat to 10.200.0.14"), std::string::npos) << rules;
  }
  EXPECT_FALSE(std::filesystem::exists(run_dir_.path() / "c1"));
  EXPECT_FALSE(link_in(host_.get(), "vh-c1").has_value());
}

TEST_F(CloneNetworkTest, WithoutARunDirectoryTheNamespaceIsHeldByItsFdAlone) {
  ASSERT_OK_AND_ASSIGN(auto network, CloneNetwork::make(config_of("c1", "", 0)));
  EXPECT_EQ(network.namespace_path(), "");
  EXPECT_TRUE(link_in(network.namespace_fd(), "tap0").has_value());
}

TEST(CloneNetworkConfig, BadNamesRangesAndSlotsAreRefusedBeforeAnythingIsMade) {
  const auto good = config_of("c1", "", 0);
  ASSERT_OK(validate(good));
  auto bad = good;
  bad.name = "a-name-too-long";
  EXPECT_FALSE(validate(bad));
  bad = good;
  bad.name = "../x";
  EXPECT_FALSE(validate(bad));
  bad = good;
  bad.slot = 16384;  // a /16 has 16384 /30s: 0..16383
  EXPECT_FALSE(validate(bad));
  bad.slot = 16383;
  EXPECT_TRUE(validate(bad).has_value());
  bad = good;
  bad.guest_address = 0xC0A80002;  // 192.168.0.2: outside the TAP's /29
  EXPECT_FALSE(validate(bad));
  bad = good;
  bad.guest_address = kGateway;
  EXPECT_FALSE(validate(bad));
  bad = good;
  bad.tap_name = "veth0";
  EXPECT_FALSE(validate(bad));
  bad = good;
  bad.clone_range = {.address = 0xC0A80000, .prefix = 16};  // holds the guest's subnet
  EXPECT_FALSE(validate(bad));
}

TEST(EgressRule, ParsesRangesAndPortsAndRefusesMalformedOnes) {
  ASSERT_OK_AND_ASSIGN(auto any, parse_egress_rule("0.0.0.0/0"));
  EXPECT_EQ(any.first_port, 0);
  ASSERT_OK_AND_ASSIGN(auto web, parse_egress_rule("10.0.0.0/8:80-443"));
  EXPECT_EQ(web.destination.address, 0x0A000000U);
  EXPECT_EQ(web.first_port, 80);
  EXPECT_EQ(web.last_port, 443);
  for (const char* malformed :
       {"", "10.0.0.0", "10.0.0/8", "10.0.0.0/33", "10.0.0.1/8", "10.0.0.0/8:", "10.0.0.0/8:0",
        "10.0.0.0/8:65536", "10.0.0.0/8:443-80", "10.0.0.0/8:80-", "10.0.0.0/8:x", "300.0.0.0/8"}) {
    EXPECT_FALSE(parse_egress_rule(malformed).has_value()) << "'" << malformed << "' accepted";
  }
  EgressPolicy huge{.mode = EgressPolicy::Mode::kAllowList};
  huge.allow.assign(kMaxEgressRules + 1, any);
  EXPECT_FALSE(validate(huge));
}

}  // namespace
}  // namespace dsec::network

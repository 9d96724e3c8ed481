#include "vmm/network/clone_network.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "vmm/network/namespace_thread.h"
#include "vmm/network/netlink.h"
#include "vmm/network/nftables.h"

namespace dsec::network {
namespace {

constexpr Ipv4Cidr kLinkLocal{.address = 0xA9FE0000, .prefix = 16};  // 169.254.0.0/16
constexpr Ipv4Cidr kMulticast{.address = 0xE0000000, .prefix = 4};   // 224.0.0.0/4
constexpr Ipv4Cidr kLoopback{.address = 0x7F000000, .prefix = 8};
constexpr const char* kNatTable = "dsec_nat";

uint32_t mask_of(uint8_t prefix) {
  return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
}

bool contains(Ipv4Cidr range, uint32_t address) {
  return (address & mask_of(range.prefix)) == (range.address & mask_of(range.prefix));
}

std::string ip(uint32_t address) {
  const std::string cidr = to_string({.address = address, .prefix = 32});
  return cidr.substr(0, cidr.find('/'));
}

// A persistent TAP (TUNSETPERSIST), IFF_TAP | IFF_NO_PI as the VMM opens it
// (vmm/devices/virtio/net/tap.cpp): it outlives this descriptor until deleted.
Status make_persistent_tap(const std::string& name) {
  UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
  if (!fd) {
    return fail_errno("/dev/net/tun", errno, "load the tun module (modprobe tun)");
  }
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) {
    return fail_errno("TUNSETIFF " + name, errno, "needs CAP_NET_ADMIN");
  }
  if (::ioctl(fd.get(), TUNSETPERSIST, 1) != 0) {
    return fail_errno("TUNSETPERSIST " + name, errno);
  }
  return ok();
}

// The namespace's own sysctl (net sysctls follow the opening thread's namespace).
Status enable_forwarding() {
  UniqueFd fd(::open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC));
  if (!fd || ::write(fd.get(), "1", 1) != 1) {
    return fail_errno("/proc/sys/net/ipv4/ip_forward in the clone's namespace", errno);
  }
  return ok();
}

Status unmount_namespace(const std::string& path) {
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return fail_errno("unmounting the network namespace " + path, errno);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail_errno("removing " + path, errno);
  }
  return ok();
}

Status bind_namespace(int fd, const std::string& run_dir, const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  if (error) {
    return fail("making " + run_dir + ": " + error.message());
  }
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
  if (!file) {
    return fail_errno(path, errno,
                      errno == EEXIST ? "a clone network of that name exists, or was left by a "
                                        "killed process: remove_stale() it"
                                      : "");
  }
  const std::string source = "/proc/self/fd/" + std::to_string(fd);
  if (::mount(source.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    const int saved = errno;
    ::unlink(path.c_str());
    return fail_errno("bind-mounting the network namespace on " + path, saved);
  }
  return ok();
}

// The egress filter's drop counter in the namespace `netns`: {packets, bytes}, zero when
// no filter is there yet.
Result<std::pair<uint64_t, uint64_t>> read_drop_counter(int netns) {
  const auto listed = DSEC_TRY(in_namespace(netns, []() -> Result<std::string> {
    auto nft = DSEC_TRY(Nftables::open());
    const auto tables = DSEC_TRY(nft.run("list tables inet\n"));
    if (tables.find(std::string(" ") + kEgressTable + "\n") == std::string::npos) {
      return std::string();
    }
    return nft.run(fmt::format("list counter inet {} {}\n", kEgressTable, kEgressDropCounter));
  }));
  if (listed.empty()) {
    return std::pair<uint64_t, uint64_t>{0, 0};
  }
  unsigned long long packets = 0;
  unsigned long long bytes = 0;
  const auto at = listed.find("packets ");
  if (at == std::string::npos ||
      std::sscanf(listed.c_str() + at, "packets %llu bytes %llu", &packets, &bytes) != 2) {
    return fail("nftables: no packets and bytes in the egress drop counter: " + listed);
  }
  return std::pair<uint64_t, uint64_t>{packets, bytes};
}

}  // namespace

struct CloneNetwork::State {
  CloneNetworkConfig config;
  UniqueFd host;     // the namespace it was made from
  UniqueFd clone;    // the clone's
  std::string path;  // its bind mount, once made
  bool veth_made = false;
  // The filter's drops counted by the rule sets replaced so far.
  uint64_t dropped_bytes_before = 0;
  uint64_t dropped_packets_before = 0;
};

std::string host_veth_name(const std::string& name) {
  return "vh-" + name;
}

Status validate_name(const std::string& name) {
  if (name.empty() || name.size() > 12 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789-_") != std::string::npos) {
    return fail("clone network name '" + name + "'", "give 1 to 12 letters, digits, '-' or '_'");
  }
  return ok();
}

Status validate(const CloneNetworkConfig& config) {
  DSEC_TRY(validate_name(config.name));
  if (config.tap_name.empty() || config.tap_name.size() >= IFNAMSIZ) {
    return fail("clone network " + config.name + ": TAP name '" + config.tap_name + "'",
                fmt::format("give 1 to {} bytes", IFNAMSIZ - 1));
  }
  if (config.tap_name == kNamespaceVeth || config.tap_name == "lo") {
    return fail("clone network " + config.name + ": TAP name '" + config.tap_name +
                "' is taken in the namespace");
  }
  if (config.tap_address.prefix > 30 || config.tap_address.prefix == 0 ||
      !contains(config.tap_address, config.guest_address) ||
      config.guest_address == config.tap_address.address) {
    return fail(
        "clone network " + config.name + ": the guest's address " + ip(config.guest_address) +
            " is not another address of the TAP's " + to_string(config.tap_address),
        "give the TAP an address with a prefix of at most 30 whose subnet holds the guest's");
  }
  const auto& range = config.clone_range;
  if (range.prefix > 30 || (range.address & ~mask_of(range.prefix)) != 0) {
    return fail("clone range " + to_string(range), "give a network of prefix 30 or less");
  }
  if (config.slot >= (uint64_t{1} << (30 - range.prefix))) {
    return fail(fmt::format("clone network {}: slot {} is outside the range {} ({} slots)",
                            config.name, config.slot, to_string(range),
                            uint64_t{1} << (30 - range.prefix)));
  }
  if (contains(range, config.guest_address) || contains(config.tap_address, range.address)) {
    return fail("clone network " + config.name + ": the clone range " + to_string(range) +
                " overlaps the guest's subnet " + to_string(config.tap_address));
  }
  return validate(config.egress);
}

CloneNetwork::CloneNetwork(std::unique_ptr<State> state) : state_(std::move(state)) {}
CloneNetwork::CloneNetwork(CloneNetwork&&) noexcept = default;
CloneNetwork& CloneNetwork::operator=(CloneNetwork&&) noexcept = default;

CloneNetwork::~CloneNetwork() {
  if (!state_) {
    return;
  }
  // Best effort, in the reverse order of build(): the host's veth end (its peer goes with
  // it), what the namespace holds (in case a VMM still holds the namespace), its mount.
  if (state_->veth_made) {
    (void)in_namespace(state_->host.get(), [&]() -> Status {
      auto netlink = DSEC_TRY(Netlink::open());
      return netlink.delete_link(host_veth_name(state_->config.name));
    });
  }
  if (state_->clone) {
    (void)in_namespace(state_->clone.get(), [&]() -> Status {
      auto netlink = DSEC_TRY(Netlink::open());
      DSEC_TRY(netlink.delete_link(state_->config.tap_name));
      auto nft = DSEC_TRY(Nftables::open());
      return nft.apply("flush ruleset\n");
    });
  }
  if (!state_->path.empty()) {
    (void)unmount_namespace(state_->path);
  }
}

Result<CloneNetwork> CloneNetwork::make(const CloneNetworkConfig& config) {
  DSEC_TRY(validate(config));
  auto state = std::make_unique<State>();
  state->config = config;
  state->host = DSEC_TRY(current_network_namespace());
  CloneNetwork network(std::move(state));
  if (auto built = network.build(); !built) {
    return std::unexpected(built.error().with_context("clone network " + config.name));
  }
  return network;
}

Result<CloneNetwork> CloneNetwork::adopt(const CloneNetworkConfig& config) {
  DSEC_TRY(validate(config));
  if (config.run_dir.empty()) {
    return fail("clone network " + config.name + ": nothing to adopt without a run_dir");
  }
  auto state = std::make_unique<State>();
  state->config = config;
  state->host = DSEC_TRY(current_network_namespace());
  state->clone = DSEC_TRY(open_network_namespace(config.run_dir + "/" + config.name));
  state->path = config.run_dir + "/" + config.name;
  state->veth_made = true;
  CloneNetwork network(std::move(state));
  // What a make() left is whole, or it is refused (and then removed with `network`).
  const auto missing = [&](int netns, const std::string& link) -> Status {
    const auto index = DSEC_TRY(in_namespace(netns, [&]() -> Result<std::optional<int>> {
      auto netlink = DSEC_TRY(Netlink::open());
      return netlink.link_index(link);
    }));
    if (!index) {
      return fail("clone network " + config.name + ": no link " + link + " to adopt",
                  "remove_stale() it and make it anew");
    }
    return ok();
  };
  DSEC_TRY(missing(network.state_->host.get(), host_veth_name(config.name)));
  DSEC_TRY(missing(network.state_->clone.get(), config.tap_name));
  DSEC_TRY(network.set_egress(config.egress));
  return network;
}

uint32_t CloneNetwork::host_veth_address() const {
  return state_->config.clone_range.address + state_->config.slot * 4 + 1;
}

uint32_t CloneNetwork::namespace_veth_address() const {
  return host_veth_address() + 1;
}

Status CloneNetwork::build() {
  const auto& config = state_->config;
  const std::string host_veth = host_veth_name(config.name);
  state_->clone = DSEC_TRY(make_network_namespace());
  if (!config.run_dir.empty()) {
    // Bound before any link is made: a second network of a name in use is refused here,
    // having touched nothing of the first.
    const std::string path = config.run_dir + "/" + config.name;
    DSEC_TRY(bind_namespace(state_->clone.get(), config.run_dir, path));
    state_->path = path;
  }
  DSEC_TRY(in_namespace(state_->host.get(), [&]() -> Status {
    auto netlink = DSEC_TRY(Netlink::open());
    DSEC_TRY(netlink.add_veth(host_veth, kNamespaceVeth, state_->clone.get()));
    state_->veth_made = true;
    DSEC_TRY(netlink.add_address(host_veth, {.address = host_veth_address(), .prefix = 30}));
    return netlink.set_up(host_veth);
  }));
  DSEC_TRY(in_namespace(state_->clone.get(), [&]() -> Status {
    DSEC_TRY(make_persistent_tap(config.tap_name));
    auto netlink = DSEC_TRY(Netlink::open());
    DSEC_TRY(netlink.set_up("lo"));
    DSEC_TRY(netlink.add_address(config.tap_name, config.tap_address));
    DSEC_TRY(netlink.set_up(config.tap_name));
    DSEC_TRY(
        netlink.add_address(kNamespaceVeth, {.address = namespace_veth_address(), .prefix = 30}));
    DSEC_TRY(netlink.set_up(kNamespaceVeth));
    DSEC_TRY(netlink.add_default_route(host_veth_address()));
    DSEC_TRY(enable_forwarding());
    // The guest's address leaves as the namespace's veth address (conntrack takes the
    // answers back), and what the host sends to that address goes to the guest.
    auto nft = DSEC_TRY(Nftables::open());
    return nft.apply(fmt::format(
        "table ip {0} {{\n"
        "  chain postrouting {{\n"
        "    type nat hook postrouting priority srcnat; policy accept;\n"
        "    oifname \"{1}\" ip saddr {2} snat to {3}\n"
        "  }}\n"
        "  chain prerouting {{\n"
        "    type nat hook prerouting priority dstnat; policy accept;\n"
        "    iifname \"{1}\" ip daddr {3} dnat to {2}\n"
        "  }}\n"
        "}}\n",
        kNatTable, kNamespaceVeth, ip(config.guest_address), ip(namespace_veth_address())));
  }));
  return set_egress(config.egress);
}

Status CloneNetwork::set_egress(const EgressPolicy& policy) {
  DSEC_TRY(validate(policy));
  const auto& config = state_->config;
  EgressScope scope{.tap = config.tap_name, .veth = kNamespaceVeth, .reserved = config.reserved};
  for (const auto range : {kLinkLocal, kMulticast, kLoopback, config.clone_range}) {
    scope.reserved.push_back(range);
  }
  const auto host_addresses =
      DSEC_TRY(in_namespace(state_->host.get(), []() -> Result<std::vector<Ipv4Cidr>> {
        auto netlink = DSEC_TRY(Netlink::open());
        return netlink.ipv4_addresses();
      }));
  scope.reserved.insert(scope.reserved.end(), host_addresses.begin(), host_addresses.end());
  const std::string commands = egress_ruleset(policy, scope);
  // The new table's counter starts at zero: carry the old one's over.
  const auto [packets, bytes] = DSEC_TRY(read_drop_counter(state_->clone.get()));
  DSEC_TRY(in_namespace(state_->clone.get(), [&]() -> Status {
    auto nft = DSEC_TRY(Nftables::open());
    return nft.apply(commands);
  }));
  state_->dropped_packets_before += packets;
  state_->dropped_bytes_before += bytes;
  state_->config.egress = policy;
  return ok();
}

Result<CloneNetworkCounters> CloneNetwork::counters() const {
  const std::string host_veth = host_veth_name(state_->config.name);
  const auto stats =
      DSEC_TRY(in_namespace(state_->host.get(), [&]() -> Result<std::optional<rtnl_link_stats64>> {
        auto netlink = DSEC_TRY(Netlink::open());
        return netlink.link_stats(host_veth);
      }));
  if (!stats) {
    return fail("clone network " + state_->config.name + ": its veth end " + host_veth +
                " is gone");
  }
  const auto [packets, bytes] = DSEC_TRY(read_drop_counter(state_->clone.get()));
  // The host's end receives what the namespace sends, and sends what it receives.
  return CloneNetworkCounters{.sent_bytes = stats->rx_bytes,
                              .sent_packets = stats->rx_packets,
                              .received_bytes = stats->tx_bytes,
                              .received_packets = stats->tx_packets,
                              .dropped_bytes = state_->dropped_bytes_before + bytes,
                              .dropped_packets = state_->dropped_packets_before + packets};
}

int CloneNetwork::namespace_fd() const {
  return state_->clone.get();
}

const std::string& CloneNetwork::namespace_path() const {
  return state_->path;
}

const CloneNetworkConfig& CloneNetwork::config() const {
  return state_->config;
}

Result<std::string> CloneNetwork::ruleset() const {
  return in_namespace(state_->clone.get(), []() -> Result<std::string> {
    auto nft = DSEC_TRY(Nftables::open());
    return nft.run("list ruleset\n");
  });
}

Status CloneNetwork::remove_stale(const std::string& name, const std::string& run_dir) {
  DSEC_TRY(validate_name(name));
  auto netlink = DSEC_TRY(Netlink::open());
  DSEC_TRY(netlink.delete_link(host_veth_name(name)));
  if (!run_dir.empty()) {
    DSEC_TRY(unmount_namespace(run_dir + "/" + name));
  }
  return ok();
}

}  // namespace dsec::network

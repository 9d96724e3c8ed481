#include "vmm/pool/pool_networks.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <filesystem>

#include "vmm/network/egress_policy.h"

namespace dsec::pool {
namespace {

constexpr const char* kNamePrefix = "dp";

uint32_t slot_count(network::Ipv4Cidr range) {
  return static_cast<uint32_t>(uint64_t{1} << (30 - range.prefix));
}

}  // namespace

Result<ImageNetwork> image_network(const std::string& tap, const std::string& host_cidr) {
  constexpr const char* kHint =
      "make the warm image with --net tap=NAME,host=A.B.C.D/N: every clone gets a TAP of "
      "that name with that address, the guest's gateway, in a namespace of its own";
  if (host_cidr.empty()) {
    return fail("its snapshot's network device has no host address", kHint);
  }
  const auto address = virtio::parse_ipv4_cidr(host_cidr);
  if (!address) {
    return fail("its snapshot's network device's host address: " + address.error().message(),
                kHint);
  }
  const uint32_t guest = address->address + 1;
  const uint32_t mask = address->prefix == 0 ? 0 : ~uint32_t{0} << (32 - address->prefix);
  // The guest's is the address after the TAP's; it must be a host address of the subnet.
  if (address->prefix > 30 || (guest & mask) != (address->address & mask) ||
      (guest | mask) == ~uint32_t{0}) {
    return fail("its snapshot's TAP address " + host_cidr +
                    " leaves no next address for the guest in its subnet",
                kHint);
  }
  if (tap.empty() || tap.size() > 15 ||
      tap.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
          std::string::npos ||
      tap == "veth0" || tap == "lo") {
    return fail("its snapshot's TAP name '" + tap + "' cannot be made in a clone's namespace",
                "give the warm image a TAP name of 1 to 15 letters, digits, '-', '_' or '.', "
                "neither veth0 nor lo");
  }
  return ImageNetwork{.tap = tap, .tap_address = *address, .guest_address = guest};
}

Result<network::Ipv4Cidr> parse_clone_range(const std::string& text) {
  auto range = virtio::parse_ipv4_cidr(text);
  const uint32_t mask =
      range && range->prefix != 0 ? ~uint32_t{0} << (32 - range->prefix) : uint32_t{0};
  if (!range || range->prefix > 30 || range->prefix < 8 || (range->address & ~mask) != 0) {
    return fail("--clone-network-range " + text + " is not a network of prefix 8 to 30",
                "give one that no host interface, route or other daemon uses, e.g. "
                "10.200.0.0/16 (a /30 per clone)");
  }
  return *range;
}

PoolNetworks::PoolNetworks(std::shared_ptr<network::CloneNetworks> networks,
                           PoolNetworkOptions options)
    : networks_(std::move(networks)),
      options_(std::move(options)),
      slots_(JailIdRange{.first = 0, .last = slot_count(options_.clone_range) - 1}) {}

std::string PoolNetworks::name_in(network::Ipv4Cidr range, uint32_t slot) {
  return fmt::format("{}{:08x}", kNamePrefix, range.address + 4 * slot);
}

network::CloneNetworkConfig PoolNetworks::config(uint32_t slot, const ImageNetwork& image,
                                                 const network::EgressPolicy& egress) const {
  return network::CloneNetworkConfig{.name = name(slot),
                                     .run_dir = options_.run_dir,
                                     .tap_name = image.tap,
                                     .tap_address = image.tap_address,
                                     .guest_address = image.guest_address,
                                     .clone_range = options_.clone_range,
                                     .slot = slot,
                                     .egress = egress,
                                     .reserved = {}};
}

PoolResult<uint32_t> PoolNetworks::make(const ImageNetwork& image,
                                        const network::EgressPolicy& egress) {
  auto slot = slots_.allocate();
  if (!slot) {
    return std::unexpected(error(
        Failure::kFull, fmt::format("every clone network of --clone-network-range {} is a live "
                                    "clone's; release sandboxes, or give a wider range",
                                    network::to_string(options_.clone_range))));
  }
  if (auto made = networks_->make(config(*slot, image, egress)); !made) {
    slots_.release(*slot);
    return std::unexpected(
        error(Failure::kUnavailable, "cannot make a clone's network: " + made.error().message()));
  }
  return *slot;
}

Status PoolNetworks::adopt(uint32_t slot, const ImageNetwork& image,
                           const network::EgressPolicy& egress) {
  if (!slots_.adopt(slot)) {
    return fail(fmt::format("clone network slot {} is outside the range or taken", slot));
  }
  if (auto adopted = networks_->adopt(config(slot, image, egress)); !adopted) {
    slots_.release(slot);
    return adopted;
  }
  return ok();
}

void PoolNetworks::release(uint32_t slot) {
  if (auto removed = networks_->remove(name(slot), options_.run_dir); !removed) {
    spdlog::error("pool: clone network {}: {}", name(slot), removed.error().message());
  }
  slots_.release(slot);
}

void PoolNetworks::remove_left(uint32_t slot) {
  if (slots_.used(slot)) {
    return;  // another clone's now
  }
  if (auto removed = networks_->remove(name(slot), options_.run_dir); !removed) {
    spdlog::error("pool: clone network {}: {}", name(slot), removed.error().message());
  }
}

void PoolNetworks::remove_unknown() {
  std::error_code ec;
  std::vector<uint32_t> unknown;
  for (const auto& entry : std::filesystem::directory_iterator(options_.run_dir, ec)) {
    const std::string file = entry.path().filename().string();
    uint32_t address = 0;
    if (file.size() != 10 || !file.starts_with(kNamePrefix)) {
      continue;
    }
    const auto [end, error] =
        std::from_chars(file.data() + 2, file.data() + file.size(), address, 16);
    const uint32_t offset = address - options_.clone_range.address;
    if (error != std::errc() || end != file.data() + file.size() || file != name(offset / 4) ||
        offset % 4 != 0 || offset / 4 >= slot_count(options_.clone_range)) {
      continue;  // not a name of this pool's range
    }
    if (!slots_.used(offset / 4)) {
      unknown.push_back(offset / 4);
    }
  }
  for (const uint32_t slot : unknown) {
    spdlog::warn("pool: removing clone network {}, which no sandbox's record names", name(slot));
    remove_left(slot);
  }
}

std::string PoolNetworks::guest_side_address(uint32_t slot) const {
  const std::string cidr = network::to_string(
      network::Ipv4Cidr{.address = options_.clone_range.address + 4 * slot + 2, .prefix = 32});
  return cidr.substr(0, cidr.find('/'));
}

Status PoolNetworks::set_egress(uint32_t slot, const network::EgressPolicy& policy) {
  return networks_->set_egress(name(slot), policy);
}

Result<network::CloneNetworkCounters> PoolNetworks::counters(uint32_t slot) {
  return networks_->counters(name(slot));
}

}  // namespace dsec::pool

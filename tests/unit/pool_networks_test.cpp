// The pool's clone networks (vmm/pool/pool_networks.h), made for real by the launcher
// process (vmm/pool/launcher_networks.h, network/clone_network_host.h), as the daemon has
// them made: a network per clone by slot, the same TAP and guest address in each, gone on
// release; and a daemon killed with its launcher, started again, adopting the networks of
// the clones it keeps and removing the rest. Needs root: each test runs in a network
// namespace of its own that stands for the host.
#include "vmm/pool/pool_networks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/common/network_namespace.h"
#include "vmm/network/clone_network_host.h"
#include "vmm/network/namespace_thread.h"
#include "vmm/network/nftables.h"
#include "vmm/pool/launcher_networks.h"
#include "vmm/pool/launcher_process.h"

namespace dsec::pool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const ImageNetwork kImage{.tap = "tap0",
                          .tap_address = {.address = 0xC0A8F101, .prefix = 29},  // .1/29
                          .guest_address = 0xC0A8F102};

constexpr uint32_t kNoSlot = UINT32_MAX;

// The slot made, or kNoSlot (the failure reported).
uint32_t made(const PoolResult<uint32_t>& slot) {
  EXPECT_TRUE(slot.has_value()) << (slot ? "" : slot.error().message);
  return slot.value_or(kNoSlot);
}

bool host_has_link(const std::string& name) {
  return ::if_nametoindex(name.c_str()) != 0;
}

class PoolNetworksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0) << "the pool's network tests need root (network namespaces)";
    ASSERT_OK_AND_ASSIGN(outer_, network::current_network_namespace());
    // This thread's namespace stands for the host's from here on, the launcher's too.
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0) << std::strerror(errno);
  }
  void TearDown() override {
    networks_.reset();
    launcher_.reset();
    if (outer_) {
      EXPECT_EQ(::setns(outer_.get(), CLONE_NEWNET), 0) << std::strerror(errno);
    }
  }

  // A launcher that serves network requests as the daemon's does, and the pool's networks
  // made through it.
  void start_launcher() {
    auto host = std::make_shared<network::CloneNetworkHost>();
    auto started = LauncherProcess::start(
        "/bin/false", [host](std::string_view request) { return host->serve(request); });
    ASSERT_TRUE(started) << started.error().message();
    launcher_ = std::move(*started);
    networks_ = std::make_unique<PoolNetworks>(
        std::make_shared<LauncherNetworks>(launcher_),
        PoolNetworkOptions{.clone_range = {.address = 0x0AC80000, .prefix = 16},
                           .run_dir = run_dir_.path().string()});
  }
  bool mounted(const std::string& name) const {
    return std::filesystem::exists(run_dir_.path() / name);
  }

  UniqueFd outer_;
  test::TempDir run_dir_;
  std::shared_ptr<LauncherProcess> launcher_;
  std::unique_ptr<PoolNetworks> networks_;
};

TEST_F(PoolNetworksTest, EachCloneGetsANetworkOfItsOwnThatGoesWithIt) {
  start_launcher();
  const uint32_t first = made(networks_->make(kImage, {}));
  ASSERT_NE(first, kNoSlot);
  const uint32_t second = made(networks_->make(kImage, {}));
  ASSERT_NE(second, kNoSlot);
  EXPECT_NE(first, second);
  EXPECT_EQ(networks_->name(0), "dp0ac80000");
  EXPECT_EQ(networks_->name(1), "dp0ac80004");
  for (const uint32_t slot : {first, second}) {
    EXPECT_TRUE(mounted(networks_->name(slot))) << networks_->name(slot);
    EXPECT_TRUE(host_has_link("vh-" + networks_->name(slot)));
    EXPECT_EQ(networks_->path(slot), (run_dir_.path() / networks_->name(slot)).string());
    ASSERT_OK_AND_ASSIGN(const auto counters, networks_->counters(slot));
    EXPECT_EQ(counters.dropped_packets, 0U);
  }
  // The TAP is in neither the host's namespace nor made twice in one.
  EXPECT_FALSE(host_has_link("tap0"));
  EXPECT_EQ(networks_->guest_side_address(1), "10.200.0.6");
  ASSERT_OK(networks_->set_egress(first, {.mode = network::EgressPolicy::Mode::kAll}));

  networks_->release(first);
  EXPECT_FALSE(mounted(networks_->name(first)));
  EXPECT_FALSE(host_has_link("vh-" + networks_->name(first)));
  EXPECT_TRUE(mounted(networks_->name(second)));
  auto gone = networks_->counters(first);
  ASSERT_FALSE(gone.has_value());
  EXPECT_THAT(gone.error().message(), HasSubstr("no clone network"));
  networks_->release(second);
  EXPECT_EQ(networks_->used(), 0U);
  EXPECT_TRUE(std::filesystem::is_empty(run_dir_.path()));
}

TEST_F(PoolNetworksTest, ADaemonStartedAgainAdoptsItsClonesNetworksAndRemovesTheRest) {
  start_launcher();
  const uint32_t kept = made(networks_->make(kImage, {}));
  ASSERT_NE(kept, kNoSlot);
  const uint32_t dead = made(networks_->make(kImage, {}));
  ASSERT_NE(dead, kNoSlot);
  const uint32_t unrecorded = made(networks_->make(kImage, {}));
  ASSERT_NE(unrecorded, kNoSlot);
  // The daemon is killed: its launcher dies with it (SIGKILL), destroying nothing.
  ASSERT_EQ(::kill(launcher_->pid(), SIGKILL), 0);
  networks_.reset();
  launcher_.reset();
  for (const uint32_t slot : {kept, dead, unrecorded}) {
    ASSERT_TRUE(mounted(PoolNetworks::name_in({.address = 0x0AC80000, .prefix = 16}, slot)));
  }

  start_launcher();
  ASSERT_OK(networks_->adopt(kept, kImage, {.mode = network::EgressPolicy::Mode::kAll}));
  EXPECT_FALSE(networks_->adopt(kept, kImage, {}).has_value()) << "adopted twice";
  networks_->remove_left(dead);  // its record said its VMM was gone
  networks_->remove_unknown();   // no record named this one
  EXPECT_TRUE(mounted(networks_->name(kept)));
  EXPECT_TRUE(host_has_link("vh-" + networks_->name(kept)));
  for (const uint32_t slot : {dead, unrecorded}) {
    EXPECT_FALSE(mounted(networks_->name(slot))) << networks_->name(slot);
    EXPECT_FALSE(host_has_link("vh-" + networks_->name(slot)));
  }
  // A new clone gets a free slot, never the adopted one's.
  const uint32_t fresh = made(networks_->make(kImage, {}));
  ASSERT_NE(fresh, kNoSlot);
  EXPECT_NE(fresh, kept);
  networks_->release(fresh);
  networks_->release(kept);
  EXPECT_TRUE(std::filesystem::is_empty(run_dir_.path()));
}

// A host port forwarded to a clone's guest port is a DNAT rule in the host's namespace,
// to the clone's namespace veth address; it goes with the clone's network.
TEST_F(PoolNetworksTest, AForwardedPortIsARuleOfTheHostThatGoesWithTheNetwork) {
  start_launcher();
  const uint32_t slot = made(networks_->make(kImage, {}));
  ASSERT_NE(slot, kNoSlot);
  ASSERT_OK_AND_ASSIGN(const uint16_t port, networks_->forward_port(slot, 8000));
  EXPECT_EQ(port, network::kFirstForwardedPort);
  ASSERT_OK_AND_ASSIGN(const uint16_t again, networks_->forward_port(slot, 8000));
  EXPECT_EQ(again, port) << "the same guest port keeps its host port";
  ASSERT_OK_AND_ASSIGN(const uint16_t other, networks_->forward_port(slot, 22));
  EXPECT_NE(other, port);
  const auto table = [] {
    auto nft = network::Nftables::open();
    auto listed = nft ? nft->run("list table ip dsec_ports") : Result<std::string>("");
    return listed ? *listed : std::string("(none)");
  };
  EXPECT_THAT(table(), HasSubstr("tcp dport 30000 dnat to 10.200.0.2:8000")) << table();
  EXPECT_THAT(table(), HasSubstr("tcp dport 30001 dnat to 10.200.0.2:22"));
  // A port asked for by number (an adopted clone's, where it was): free, or refused.
  ASSERT_OK_AND_ASSIGN(const uint16_t chosen, networks_->forward_port(slot, 9000, 30100));
  EXPECT_EQ(chosen, 30100);
  EXPECT_THAT(table(), HasSubstr("tcp dport 30100 dnat to 10.200.0.2:9000"));
  EXPECT_FALSE(networks_->forward_port(slot, 9001, 30100).has_value()) << "taken";
  EXPECT_FALSE(networks_->forward_port(slot, 9001, 80).has_value()) << "outside the range";
  networks_->release(slot);
  EXPECT_EQ(table(), "(none)") << "the table goes with the last forward";
  EXPECT_FALSE(networks_->forward_port(slot, 8000).has_value()) << "no network, no forward";
}

TEST(PoolImageNetwork, TheGuestsAddressIsTheOneAfterTheTapsAndBadOnesAreRefused) {
  ASSERT_OK_AND_ASSIGN(const auto image, image_network("tap0", "192.168.241.1/29"));
  EXPECT_EQ(image, kImage);
  const auto refused = [](const std::string& tap, const std::string& host) {
    auto network = image_network(tap, host);
    return network ? std::string("accepted") : network.error().message();
  };
  EXPECT_THAT(refused("tap0", ""), HasSubstr("--net tap=NAME,host=A.B.C.D/N"));
  EXPECT_THAT(refused("tap0", "192.168.241.6/29"), HasSubstr("no next address for the guest"));
  EXPECT_THAT(refused("tap0", "192.168.241.1/31"), HasSubstr("no next address"));
  EXPECT_NE(refused("tap0", "192.168.241.1"), "accepted");
  EXPECT_THAT(refused("veth0", "192.168.241.1/29"), HasSubstr("TAP name"));
  EXPECT_THAT(refused("a/b", "192.168.241.1/29"), HasSubstr("TAP name"));
  EXPECT_THAT(refused("a-very-long-tap-name", "192.168.241.1/29"), HasSubstr("TAP name"));
}

TEST(PoolImageNetwork, TheCloneRangeIsANetworkOfPrefix8To30) {
  ASSERT_OK_AND_ASSIGN(const auto range, parse_clone_range("10.200.0.0/16"));
  EXPECT_EQ(range.address, 0x0AC80000U);
  for (const char* bad : {"10.200.0.1/16", "10.0.0.0/31", "10.0.0.0/4", "10.0.0.0", "x"}) {
    auto parsed = parse_clone_range(bad);
    ASSERT_FALSE(parsed.has_value()) << bad;
    EXPECT_THAT(parsed.error().message(), HasSubstr("--clone-network-range")) << bad;
  }
}

}  // namespace
}  // namespace dsec::pool

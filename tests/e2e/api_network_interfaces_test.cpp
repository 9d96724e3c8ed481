// Firecracker's several network interfaces end to end: two PUT /network-interfaces of a
// `dsec-vmm serve` are the guest's eth0 and eth1, each with the MAC its PUT gave, each
// carrying traffic to its own TAP.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/api_sandbox.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/run_command.h"
#include "tests/support/sandbox.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;

// A TAP of its own, addressed `host_ip`/24 on the host; deleted with it.
class HostTap {
 public:
  HostTap(std::string name, std::string host_ip)
      : name_(std::move(name)), host_ip_(std::move(host_ip)) {
    const auto made =
        run_command("ip tuntap add dev " + name_ + " mode tap && ip addr add " + host_ip_ +
                    "/24 dev " + name_ + " && ip link set dev " + name_ + " up 2>&1");
    made_ = made.exit_status == 0;
    EXPECT_TRUE(made_) << "making TAP " << name_ << ": " << made.output;
  }
  HostTap(const HostTap&) = delete;
  HostTap& operator=(const HostTap&) = delete;
  ~HostTap() { (void)run_command("ip link del " + name_ + " 2>/dev/null"); }

  bool made() const { return made_; }
  const std::string& name() const { return name_; }
  const std::string& host_ip() const { return host_ip_; }

 private:
  std::string name_;
  std::string host_ip_;
  bool made_ = false;
};

// Each interface is reached only through its own TAP: the host's two addresses are on
// different TAPs and subnets, so a ping of each answers only if the guest's interface of
// that subnet is the device on that TAP. The frames each TAP counted say the same from
// the host's side. Then a snapshot of the VM loads into a fresh VMM with one interface on
// a new TAP, and both carry traffic again.
TEST(ApiNetworkInterfaces, TwoInterfacesAreEth0AndEth1EachOnItsOwnTapAndSurviveALoad) {
  const int n = 20 + static_cast<int>(::getpid() % 200);
  const std::string suffix = std::to_string(::getpid() % 10000);
  const HostTap wan("mnwan" + suffix, fmt::format("10.94.{}.1", n));
  std::optional<HostTap> lan;
  lan.emplace("mnlan" + suffix, fmt::format("10.95.{}.1", n));
  ASSERT_TRUE(wan.made() && lan->made());

  auto vm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vm);
  const std::string wan_mac = fmt::format("06:00:0a:5e:{:02x}:02", n);
  const std::string lan_mac = fmt::format("06:00:0a:5f:{:02x}:02", n);
  ASSERT_TRUE(client.send("PUT", "/boot-source", default_image_boot_source()));
  ASSERT_TRUE(client.send("PUT", "/vsock", {{"guest_cid", 3}, {"uds_path", vm->vsock_path()}}));
  ASSERT_TRUE(client.send(
      "PUT", "/network-interfaces/wan",
      {{"iface_id", "wan"}, {"host_dev_name", wan.name()}, {"guest_mac", wan_mac}}));
  ASSERT_TRUE(client.send(
      "PUT", "/network-interfaces/lan",
      {{"iface_id", "lan"}, {"host_dev_name", lan->name()}, {"guest_mac", lan_mac}}));
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "InstanceStart"}}))
      << vm->describe();
  ASSERT_TRUE(vm->wait_ready(300s, why)) << why;

  const auto config = client.get("/vm/config");
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->at("network-interfaces").size(), 2u) << config->dump();
  EXPECT_EQ(config->at("network-interfaces")[1].at("iface_id"), "lan");

  const ShellOutput macs =
      sh(*vm, "cat /sys/class/net/eth0/address /sys/class/net/eth1/address");
  ASSERT_TRUE(macs.ok()) << macs.out;
  EXPECT_EQ(macs.out, wan_mac + "\n" + lan_mac + "\n") << "eth0 is wan, eth1 is lan";

  const auto tap_rx = [](const HostTap& tap) {
    const auto r = run_command("cat /sys/class/net/" + tap.name() + "/statistics/rx_packets");
    return std::stoull(r.output);
  };
  // Pings of both host addresses, each counted by its own TAP.
  const auto ping_both = [&](Sandbox& guest, const std::string& first, const std::string& when) {
    const unsigned long long wan_before = tap_rx(wan);
    const unsigned long long lan_before = tap_rx(*lan);
    const ShellOutput pinged =
        sh(guest, first + "ping -c 3 -W 30 " + wan.host_ip() + " && ping -c 3 -W 30 " +
                      lan->host_ip() + " 2>&1");
    EXPECT_TRUE(pinged.ok()) << when << ": " << pinged.out << guest.describe();
    EXPECT_GE(tap_rx(wan) - wan_before, 3u) << when << ": pings of " << wan.host_ip() << " by eth0";
    EXPECT_GE(tap_rx(*lan) - lan_before, 3u) << when << ": pings of " << lan->host_ip() << " by eth1";
  };
  ping_both(*vm,
            fmt::format("ip addr add 10.94.{0}.2/24 dev eth0 && ip link set eth0 up && "
                        "ip addr add 10.95.{0}.2/24 dev eth1 && ip link set eth1 up && ",
                        n),
            "booted");

  // A snapshot keeps both; a load gives lan another TAP (network_overrides) and wan
  // keeps the snapshot's.
  const auto dir = local_dir("dsec-multi-net");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(client.send("PATCH", "/vm", {{"state", "Paused"}}));
  ASSERT_TRUE(client.send("PUT", "/snapshot/create",
                          {{"snapshot_path", (dir / "state").string()},
                           {"mem_file_path", (dir / "memory").string()}}))
      << vm->describe();
  vm.reset();
  lan.reset();
  lan.emplace("mnlanb" + suffix, fmt::format("10.95.{}.1", n));
  ASSERT_TRUE(lan->made());
  auto clone = Sandbox::serve();
  ASSERT_TRUE(clone->wait_for_api(30s, why)) << why;
  const auto clone_client = api_of(*clone);
  ASSERT_TRUE(clone_client.send(
      "PUT", "/snapshot/load",
      {{"snapshot_path", (dir / "state").string()},
       {"mem_backend", {{"backend_type", "File"}, {"backend_path", (dir / "memory").string()}}},
       {"network_overrides", {{{"iface_id", "lan"}, {"host_dev_name", lan->name()}}}},
       {"vsock_override", {{"uds_path", clone->vsock_path()}}},
       {"resume_vm", true}}))
      << clone->describe();
  ASSERT_TRUE(clone->wait_ready(300s, why)) << why;
  const auto loaded = clone_client.get("/vm/config");
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(loaded->at("network-interfaces")[0].at("host_dev_name"), wan.name());
  EXPECT_EQ(loaded->at("network-interfaces")[1].at("host_dev_name"), lan->name());
  // The new TAP has another MAC than the one the guest's ARP cache holds.
  ping_both(*clone, "ip neigh flush all && ", "loaded");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsec::test

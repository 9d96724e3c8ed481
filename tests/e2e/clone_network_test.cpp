// A VM in a clone network (vmm/network, docs/network.md): a jailed `dsec-vmm run --netns`
// attaches it to the TAP of a namespace that a CloneNetwork made (the jail stays in that
// namespace instead of making its own), and the egress policy, set from the host while the
// VM runs, decides what it reaches. The destination stands for the outside
// world: a listener in a network namespace of its own, routed through the host (which
// forwards); the host's own address beside it stays out of reach under egress `all`.
// Needs root, cgroup v2, /dev/net/tun, veth and nf_tables (the test bed has them).
#include "vmm/network/clone_network.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/support/eventually.h"
#include "tests/support/jail_dir.h"
#include "tests/support/namespace_listener.h"
#include "tests/support/outside_network.h"
#include "tests/support/result_matchers.h"
#include "tests/support/sandbox.h"
#include "vmm/network/namespace_thread.h"
#include "vmm/network/netlink.h"

namespace dsec::test {
namespace {

using network::CloneNetwork;
using network::EgressPolicy;
using network::Netlink;

constexpr auto kReadyDeadline = std::chrono::seconds(300);
constexpr uint16_t kPort = 7070;

TEST(CloneNetworkE2e, AVmInACloneNetworkReachesOutWithEgressAllAndNothingWithNone) {
  if (default_image().kernel.empty()) return;  // the failure says how to build it
  ASSERT_TRUE(::access("/dev/net/tun", R_OK | W_OK) == 0 && ::geteuid() == 0)
      << "needs root and /dev/net/tun (the test bed has both: tools/kvm-harness)";
  const int n = static_cast<int>(::getpid() % 200);
  const std::string name = "e2e" + std::to_string(::getpid() % 100000);
  ASSERT_OK_AND_ASSIGN(
      auto clone,
      CloneNetwork::make({.name = name,
                          .tap_name = "tap0",
                          .tap_address = {.address = 0xC0A8F101, .prefix = 29},  // .241.1
                          .guest_address = 0xC0A8F102,
                          .clone_range = {.address = 0x0AC80000, .prefix = 16},  // 10.200/16
                          .slot = static_cast<uint32_t>(n),
                          .egress = {.mode = EgressPolicy::Mode::kAll}}));
  const uint32_t outside_address = 0x0AC90002 + (static_cast<uint32_t>(n) << 2);  // 10.201.x
  Outside outside(outside_address, "do-" + name);
  Listener server(outside.netns(), outside_address, kPort);
  Listener sink(outside.netns(), outside_address, kPort + 1, Listener::Kind::kSink);
  ASSERT_OK_AND_ASSIGN(auto host_ns, network::current_network_namespace());
  Listener host_service(host_ns.get(), clone.host_veth_address(), kPort);  // the host's own

  ensure_cgroup2_mounted();
  JailDir jail;
  std::vector<std::string> args{"run",        "--vcpus", "2",
                                "--memory",   "256",     "--append",
                                "dsec.agent", "--netns", clone.namespace_path(),
                                "--net",      "tap=tap0"};
  for (auto& option : jail.options()) args.push_back(std::move(option));
  auto vm = Sandbox::with_vsock_at(jail.file("vsock").string(), args);
  std::string why;
  ASSERT_TRUE(vm->wait_ready(kReadyDeadline, why)) << why;
  // The jailed VMM is in the clone's namespace, not in one of its own.
  struct stat vmm_netns = {};
  struct stat clone_netns = {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(jailed_pid(jail)) + "/ns/net").c_str(), &vmm_netns),
            0);
  ASSERT_EQ(::fstat(clone.namespace_fd(), &clone_netns), 0);
  EXPECT_EQ(vmm_netns.st_ino, clone_netns.st_ino);
  auto client = vm->client();
  const auto guest = [&](const std::string& script, std::string& out) {
    out.clear();
    auto status = client.exec(
        {{"/bin/sh", "-c", script + " 2>&1"}, {}, "", 60000, false},
        [&](std::span<const uint8_t> b) {
          out.append(b.begin(), b.end());
          return ok();
        },
        [&](std::span<const uint8_t> b) {
          out.append(b.begin(), b.end());
          return ok();
        });
    EXPECT_TRUE(status.has_value()) << status.error().message();
    return status.has_value() && status->kind == agent::ExitStatus::Kind::kExited ? status->code
                                                                                  : -1;
  };
  const auto fetch = [&](uint32_t address) {
    return "echo hi | timeout 5 nc " + ip(address) + " " + std::to_string(kPort);
  };
  std::string out;
  // The snapshot's addresses: every clone's guest has these same ones.
  ASSERT_EQ(guest("ip addr add 192.168.241.2/29 dev eth0 && ip link set eth0 up && "
                  "ip route add default via 192.168.241.1",
                  out),
            0)
      << out << vm->describe();

  EXPECT_EQ(guest(fetch(outside_address), out), 0) << out << vm->describe();
  EXPECT_EQ(out, server.reply()) << vm->describe();
  EXPECT_EQ(server.connections(), 1);
  // The host's own address is reserved: `all` does not reach it.
  EXPECT_NE(guest(fetch(clone.host_veth_address()), out), 0) << out;
  EXPECT_EQ(host_service.connections(), 0);

  // A connection that stays up, the guest sending on it 5 times a second.
  ASSERT_EQ(guest("(while true; do echo tick; sleep 0.2; done | nc " + ip(outside_address) + " " +
                      std::to_string(kPort + 1) + ") </dev/null >/dev/null 2>&1 &",
                  out),
            0)
      << out;
  ASSERT_TRUE(eventually([&] { return sink.bytes() >= 15; }, std::chrono::seconds(20)))
      << "the guest's stream did not arrive: " << sink.bytes() << " bytes";

  // Changed while the VM runs: nothing leaves any more, the open connection included (its
  // bytes stop within a second or so; before, they came every 0.2 s).
  ASSERT_OK(clone.set_egress({}));
  long last = -1;
  int still = 0;
  EXPECT_TRUE(eventually(
      [&] {
        const long now = sink.bytes();
        still = now == last ? still + 1 : 0;
        last = now;
        return still >= 15;  // 1.5 s without a byte
      },
      std::chrono::seconds(10)))
      << "the stream went on after egress none: " << sink.bytes() << " bytes";
  EXPECT_NE(guest(fetch(outside_address), out), 0) << out;
  EXPECT_EQ(out.find("hello"), std::string::npos) << out;
  EXPECT_EQ(server.connections(), 1);
}

}  // namespace
}  // namespace dsec::test

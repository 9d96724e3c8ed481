// virtio-net end to end: a sandbox with `--net` on a TAP that dsec-vmm creates and
// addresses on the host side; the guest configures eth0 through the agent and pings the
// host, and the host pings the guest. Needs root and the tun module (the test bed has both).
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/run_command.h"
#include "tests/support/sandbox.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

TEST(VirtioNet, GuestAndHostPingEachOtherOverTheTap) {
  if (default_image().kernel.empty()) return;  // the failure says how to build it
  // An e2e test never skips: it fails, saying what it needs.
  ASSERT_TRUE(::access("/dev/net/tun", R_OK | W_OK) == 0 && ::geteuid() == 0)
      << "needs root and /dev/net/tun with the tun module (the test bed has both: "
         "tools/kvm-harness)";
  const int pid = static_cast<int>(::getpid());
  const std::string tap = "dsectap" + std::to_string(pid % 1000);
  const std::string net = "10.99." + std::to_string(20 + pid % 200) + ".";
  Sandbox vm({"--net", "tap=" + tap + ",host=" + net + "1/24"});
  std::string why;
  ASSERT_TRUE(vm.wait_ready(kReadyDeadline, why)) << why;
  auto client = vm.client();

  std::string out;
  const std::string script = "ip addr add " + net + "2/24 dev eth0 && ip link set eth0 up && " +
                             "ping -c 3 -W 5 " + net + "1";
  auto status = client.exec(
      {{"/bin/sh", "-c", script + " 2>&1"}, {}, "", 60000, false},
      [&](std::span<const uint8_t> b) { out.append(b.begin(), b.end()); return ok(); },
      [&](std::span<const uint8_t> b) { out.append(b.begin(), b.end()); return ok(); });
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(status->kind, agent::ExitStatus::Kind::kExited);
  ASSERT_EQ(status->code, 0) << "guest: " << script << "\n" << out << "\n" << vm.describe();
  EXPECT_NE(out.find("3 packets received"), std::string::npos) << out;

  const ProcessOutput ping =
      run_process({"/bin/busybox", "ping", "-c", "3", "-W", "5", net + "2"}, 60s);
  EXPECT_EQ(ping.exit_status, 0) << ping.describe() << vm.describe();
  EXPECT_NE(ping.out.find("3 packets received"), std::string::npos) << ping.describe();

  // The host's side is IPv4 only: IPv6 is off on the TAP, so it has no link-local address
  // for the guest to reach and sends the guest no neighbour discovery or MLD frames.
  EXPECT_EQ(file_text("/proc/sys/net/ipv6/conf/" + tap + "/disable_ipv6"), "1\n");
  const std::string addresses = file_text("/proc/net/if_inet6");
  EXPECT_EQ(addresses.find(" " + tap + "\n"), std::string::npos) << addresses;
}

}  // namespace
}  // namespace dsec::test

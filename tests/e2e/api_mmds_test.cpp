// Firecracker's metadata service (MMDS) end to end, in firectl's order: an interface, PUT
// /mmds/config (version 2 on it), PUT /mmds with the document, InstanceStart. Inside the
// guest, busybox's nc reaches 169.254.169.254 through eth0: it PUTs for a session token,
// GETs a key with it and reads the value the host put; a GET without a token is refused
// 401. A PATCH /mmds on the running VM reaches the guest.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/api_sandbox.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/sandbox.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(ApiMmds, TheGuestReadsItsMetadataWithAVersionTwoTokenAndIsRefusedWithout) {
  const std::string tap = "mmds" + std::to_string(::getpid() % 100000);
  auto vm = Sandbox::serve();
  std::string why;
  ASSERT_TRUE(vm->wait_for_api(30s, why)) << why;
  const auto client = api_of(*vm);
  ASSERT_TRUE(client.send("PUT", "/boot-source", default_image_boot_source()));
  ASSERT_TRUE(client.send("PUT", "/vsock", {{"guest_cid", 3}, {"uds_path", vm->vsock_path()}}));
  ASSERT_TRUE(client.send("PUT", "/network-interfaces/eth0",
                          {{"iface_id", "eth0"}, {"host_dev_name", tap}}));
  ASSERT_TRUE(client.send("PUT", "/mmds/config",
                          {{"version", "V2"}, {"network_interfaces", {"eth0"}}}));
  ASSERT_TRUE(client.send("PUT", "/mmds",
                          {{"latest", {{"meta-data", {{"instance-id", "i-0123456789"}}}}}}));
  ASSERT_TRUE(client.send("PUT", "/actions", {{"action_type", "InstanceStart"}}))
      << vm->describe();
  ASSERT_TRUE(vm->wait_ready(300s, why)) << why;

  // busybox's wget cannot PUT, and in this image it crashes (a null write in the static
  // busybox 1.35) before it sends anything: nc carries every request.
  const auto request = [](const std::string& method, const std::string& path,
                          const std::string& header) {
    return "printf \"" + method + " " + path +
           " HTTP/1.1\\r\\nHost: 169.254.169.254\\r\\n" + header +
           "\\r\\n\" | nc -w 30 169.254.169.254 80";
  };
  const std::string token = "T=$(" +
                            request("PUT", "/latest/api/token",
                                    "X-metadata-token-ttl-seconds: 60\\r\\n") +
                            " | tail -n 1)";
  const ShellOutput read = sh(
      *vm, "ip addr add 10.97.0.2/24 dev eth0 && ip link set eth0 up && "
           "ip route add 169.254.169.254 dev eth0 && " +
               token + " && echo \"token ${#T}\" && " +
               request("GET", "/latest/meta-data/instance-id", "X-metadata-token: $T\\r\\n") +
               " | tail -n 1 && echo && " +
               request("GET", "/latest/meta-data/instance-id", "") + " | head -n 1");
  ASSERT_TRUE(read.ok()) << read.out << vm->describe();
  EXPECT_THAT(read.out, HasSubstr("token 43\ni-0123456789\nHTTP/1.1 401 Unauthorized"))
      << vm->describe();

  // A change on the running VM is what the guest reads next; IMDS lists an object's keys.
  ASSERT_TRUE(client.send("PATCH", "/mmds", {{"latest", {{"meta-data", {{"zone", "z1"}}}}}}));
  const ShellOutput listed =
      sh(*vm, token + " && " +
                  request("GET", "/latest/meta-data/", "X-metadata-token: $T\\r\\n") +
                  " | tail -n 2");
  ASSERT_TRUE(listed.ok()) << listed.out << vm->describe();
  EXPECT_EQ(listed.out, "instance-id\nzone");
  const auto config = client.get("/vm/config");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->at("mmds-config").at("version"), "V2");
}

}  // namespace
}  // namespace dsec::test

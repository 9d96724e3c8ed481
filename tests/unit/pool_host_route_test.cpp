// The Host-routed proxy's names (vmm/pool/host_route.h): <port>-<sandbox id>.<domain>.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vmm/pool/host_route.h"

namespace dsec::pool {
namespace {

using ::testing::HasSubstr;

TEST(HostRoute, TakesThePortAndTheSandboxFromTheFirstLabel) {
  const auto route =
      parse_host_route("8000-sb-0123abcd.sandbox.example.com", "sandbox.example.com");
  ASSERT_TRUE(route.has_value()) << route.error().message();
  EXPECT_EQ(*route, (HostRoute{.guest_port = 8000, .sandbox_id = "sb-0123abcd"}));
}

TEST(HostRoute, IgnoresTheProxysPortAndCase) {
  const auto route =
      parse_host_route("65535-SB-FF.Sandbox.Example.com:8080", "sandbox.example.com");
  ASSERT_TRUE(route.has_value()) << route.error().message();
  EXPECT_EQ(*route, (HostRoute{.guest_port = 65535, .sandbox_id = "sb-ff"}));
}

TEST(HostRoute, RefusesNamesOutsideTheDomainOrOfAnotherShape) {
  for (const char* host : {"8000-sb-1.example.org", "sandbox.example.com",
                           "8000-sb-1.xsandbox.example.com", "8000-sb-1.a.sandbox.example.com",
                           "-sb-1.sandbox.example.com", "8000.sandbox.example.com", ""}) {
    const auto route = parse_host_route(host, "sandbox.example.com");
    EXPECT_FALSE(route.has_value()) << host;
  }
}

TEST(HostRoute, RefusesPortsOutOfRangeAndIdsWithOtherCharacters) {
  for (const char* host :
       {"0-sb-1.d", "65536-sb-1.d", "08000-sb-1.d", "99999999999-sb-1.d", "80x-sb-1.d"}) {
    const auto route = parse_host_route(host, "d");
    ASSERT_FALSE(route.has_value()) << host;
    EXPECT_THAT(route.error().message(), HasSubstr("no port")) << host;
  }
  for (const char* host : {"80-sb_1.d", "80-sb%2e1.d", "80-.d"}) {
    EXPECT_FALSE(parse_host_route(host, "d").has_value()) << host;
  }
  EXPECT_FALSE(parse_host_route("80-" + std::string(65, 'a') + ".d", "d").has_value());
}

}  // namespace
}  // namespace dsec::pool

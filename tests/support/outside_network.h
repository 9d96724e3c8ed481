// For tests of clone networks (vmm/network): a stand-in for the world beyond the host.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "vmm/network/namespace_thread.h"
#include "vmm/network/netlink.h"

namespace dsec::test {

// The outside world: a namespace with `address`/30 on a veth whose host end, in the calling
// thread's namespace (the host's), has the /30's first address; its default route goes
// through the host, which forwards while it lives.
class Outside {
 public:
  explicit Outside(uint32_t address, const std::string& host_end) : host_end_(host_end) {
    auto made = [&]() -> Status {
      netns_ = DSEC_TRY(network::make_network_namespace());
      auto host = DSEC_TRY(network::Netlink::open());
      DSEC_TRY(host.add_veth(host_end_, "eth0", netns_.get()));
      DSEC_TRY(host.add_address(host_end_, {.address = address - 1, .prefix = 30}));
      DSEC_TRY(host.set_up(host_end_));
      DSEC_TRY(network::in_namespace(netns_.get(), [&]() -> Status {
        auto inside = DSEC_TRY(network::Netlink::open());
        DSEC_TRY(inside.add_address("eth0", {.address = address, .prefix = 30}));
        DSEC_TRY(inside.set_up("eth0"));
        return inside.add_default_route(address - 1);
      }));
      std::ifstream("/proc/sys/net/ipv4/ip_forward") >> forwarding_before_;
      std::ofstream("/proc/sys/net/ipv4/ip_forward") << "1";
      return ok();
    }();
    EXPECT_TRUE(made.has_value()) << made.error().message();
  }
  ~Outside() {
    if (!forwarding_before_.empty()) {
      std::ofstream("/proc/sys/net/ipv4/ip_forward") << forwarding_before_;
    }
    if (auto host = network::Netlink::open()) (void)host->delete_link(host_end_);
  }
  int netns() const { return netns_.get(); }

 private:
  std::string host_end_;
  UniqueFd netns_;
  std::string forwarding_before_;
};

}  // namespace dsec::test

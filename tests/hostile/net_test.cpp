// The hostile guest against virtio-net on a TAP (virtio 1.2, 5.1.6): the descriptor-chain
// attacks on both queues, frames over the size limit, chains shorter than the header, rx
// buffers too small for a frame, and a flood of one frame. Needs root and the tun module,
// which the test bed has; the host's kernel answers the guest's ARP requests, which is the
// valid request after each attack.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/hostile/attacks.h"

namespace dsec::test::hostile {
namespace {

bool can_make_taps() {
  return ::access("/dev/net/tun", R_OK | W_OK) == 0 && ::geteuid() == 0;
}
constexpr const char* kNeedsTaps =
    "needs root and /dev/net/tun with the tun module (the test bed has both: tools/kvm-harness)";

TEST(HostileNet, ChainAttacksOnBothQueues) {
  ASSERT_TRUE(can_make_taps()) << kNeedsTaps;
  HostileVm vm({.net = true});
  run_batch(vm, "virtio-net chains", [&vm](Script& s, Drivers& d) {
    const auto valid = [&d, &vm] {
      net_post_rx(d.net);
      net_arp(d.net, vm);
    };
    chain_attacks(s, {.name = "net tx",
                      .driver = &d.net,
                      .queue = kNetTx,
                      .trigger = [&d] { d.net.notify(kNetTx); },
                      .valid = valid});
    // The device takes an rx chain when a frame comes: the host's answer to an ARP request.
    chain_attacks(s, {.name = "net rx",
                      .driver = &d.net,
                      .queue = kNetRx,
                      .trigger = [&d, &vm] { net_send(d.net, arp_request(vm)); },
                      .valid = valid});
  });
}

TEST(HostileNet, FramesOfTheWrongSizeAndFloods) {
  ASSERT_TRUE(can_make_taps()) << kNeedsTaps;
  HostileVm vm({.net = true});
  run_batch(vm, "virtio-net frames", [&vm](Script& s, Drivers& d) {
    Driver& net = d.net;
    const uint64_t buf = net.queue(kNetTx).buffers;
    const auto broken_by = [&](const std::string& name, uint32_t chain_bytes) {
      s.label(name);
      net.init();
      s.fill(buf, 0, chain_bytes);
      net.desc(kNetTx, 0, buf, chain_bytes, 0);
      net.publish(kNetTx, 0);
      net.notify(kNetTx);
      net.wait_needs_reset();
      net_init_and_arp(net, vm);
    };
    broken_by("a frame of 65551 bytes, one over the limit", 12 + 65551);
    broken_by("a chain of 8 bytes, shorter than the header", 8);

    s.label("a frame of 65550 bytes, the limit, and an empty frame are sent (or dropped)");
    net.init();
    for (uint32_t frame : {65550U, 0U}) {
      s.fill(buf, 0, 12 + frame);
      net.desc(kNetTx, 0, buf, 12 + frame, 0);
      net.publish(kNetTx, 0);
      net.notify(kNetTx);
      net.wait_used(kNetTx);
      net.expect_last_used(kNetTx, 0, 0);
    }
    net_post_rx(net);
    net_arp(net, vm);

    s.label("rx buffers too small for any frame come back empty");
    net.init();
    for (uint16_t i = 0; i < kNetRxBuffers; ++i) {
      net.desc(kNetRx, i, net_rx_buffer(net, i), 20, kWrite);
      net.publish(kNetRx, i);
    }
    net.notify(kNetRx);
    net_send(net, arp_request(vm));
    // The reply, or a frame the host's kernel sent on its own before it: none fits.
    s.wait_not(net.queue(kNetRx).used + 2, 0, 2);
    net.expect_used_elem(kNetRx, 0, 0, 0);
    net.init();
    net_post_rx(net);
    net_arp(net, vm);

    s.label("one ARP request published 1024 times");
    net.queue(kNetTx).size = 256;
    net.init();
    s.copy(buf, arp_request(vm));
    net.desc(kNetTx, 0, buf, static_cast<uint32_t>(arp_request(vm).size()), 0);
    for (int round = 0; round < 4; ++round) {
      net.set_avail_idx(kNetTx, static_cast<uint16_t>(net.queue(kNetTx).avail_idx + 256));
      net.notify(kNetTx);
      net.wait_used(kNetTx, 256);
    }
    net_post_rx(net);
    net_arp(net, vm);
  });
}

}  // namespace
}  // namespace dsec::test::hostile

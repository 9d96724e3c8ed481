// The hostile guest's descriptor-chain and ring-index attacks (attacks.h) on every
// queue the devices take chains from: virtio-rng's, virtio-blk's, and virtio-vsock's tx and
// rx queues. Each attack must leave the device showing DEVICE_NEEDS_RESET, and after a
// reset serving a valid request. (virtio-net's queues: hostile_net_test.cpp.)
#include <gtest/gtest.h>

#include "tests/hostile/attacks.h"

namespace dsec::test::hostile {
namespace {

TEST(HostileChains, OnTheEntropyQueue) {
  HostileVm vm;
  run_batch(vm, "virtio-rng chains", [](Script& s, Drivers& d) {
    chain_attacks(s, {.name = "rng",
                      .driver = &d.rng,
                      .queue = 0,
                      .trigger = [&d] { d.rng.notify(0); },
                      .valid = [&d] { rng_request(d.rng); }});
  });
}

TEST(HostileChains, OnTheBlockRequestQueue) {
  HostileVm vm;
  run_batch(vm, "virtio-blk chains", [](Script& s, Drivers& d) {
    chain_attacks(s, {.name = "blk",
                      .driver = &d.block,
                      .queue = 0,
                      .trigger = [&d] { d.block.notify(0); },
                      .valid = [&d] { block_read(d.block, 3); }});
  });
}

TEST(HostileChains, OnTheVsockTransmitQueue) {
  HostileVm vm;
  run_batch(vm, "virtio-vsock tx chains", [](Script& s, Drivers& d) {
    uint32_t port = 3000;
    chain_attacks(s, {.name = "vsock tx",
                      .driver = &d.vsock,
                      .queue = kVsockTx,
                      .trigger = [&d] { d.vsock.notify(kVsockTx); },
                      .valid =
                          [&d, &port] {
                            vsock_post_rx(d.vsock);
                            vsock_connect(d.vsock, port++);
                          }});
  });
}

TEST(HostileChains, OnTheVsockReceiveQueue) {
  HostileVm vm;
  run_batch(vm, "virtio-vsock rx chains", [](Script& s, Drivers& d) {
    uint32_t port = 3000;
    // The device takes an rx chain when it owes the guest a packet: here the RST for a
    // connection to a port nothing listens on.
    const auto refused_connection = [&d, &port] {
      VsockPacket request;
      request.src_port = port++;
      request.dst_port = kClosedPort;
      vsock_send(d.vsock, request);
    };
    chain_attacks(s, {.name = "vsock rx",
                      .driver = &d.vsock,
                      .queue = kVsockRx,
                      .trigger = refused_connection,
                      .valid = [&d, &port] {
                        vsock_post_rx(d.vsock);
                        vsock_connect(d.vsock, port++);
                      }});
  });
}

}  // namespace
}  // namespace dsec::test::hostile

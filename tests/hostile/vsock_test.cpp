// The hostile guest against virtio-vsock (virtio 1.2, 5.10.6): packets whose header lies
// about the payload or the addresses, unknown types and ops, data beyond the credit the
// host gave, credit that lies (a huge buffer, a fwd_cnt ahead of what was sent), floods of
// requests, credit requests and connections, and rx buffers the device cannot use or that
// hold a header and nothing more. The device drops or resets what is wrong and keeps
// serving, without a device reset.
#include <gtest/gtest.h>

#include "tests/hostile/attacks.h"

namespace dsec::test::hostile {
namespace {

// A packet the device drops: the tx chain comes back, and nothing is owed to the guest.
void dropped(Script& s, Driver& vsock, const std::string& name, const VsockPacket& packet) {
  s.label(name);
  vsock_send(vsock, packet);
}

// Sends `bytes` split over descriptors of the given sizes, at head 0 of tx.
void send_split(Driver& vsock, const std::vector<uint8_t>& bytes,
                const std::vector<uint32_t>& pieces) {
  const uint64_t buf = vsock.queue(kVsockTx).buffers;
  vsock.script().copy(buf, bytes);
  uint64_t at = buf;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const bool last = i + 1 == pieces.size();
    vsock.desc(kVsockTx, static_cast<uint32_t>(i), at, pieces[i], last ? 0 : kNext,
               static_cast<uint16_t>(i + 1));
    at += pieces[i];
  }
  vsock.publish(kVsockTx, 0);
  vsock.notify(kVsockTx);
  vsock.wait_used(kVsockTx);
}

VsockPacket packet(uint16_t op, uint32_t guest_port, uint32_t host_port = kListeningPort) {
  VsockPacket p;
  p.op = op;
  p.src_port = guest_port;
  p.dst_port = host_port;
  return p;
}

TEST(HostileVsock, LyingHeadersAreDroppedOrReset) {
  HostileVm vm;
  run_batch(vm, "virtio-vsock headers", [](Script& s, Drivers& d) {
    Driver& v = d.vsock;
    vsock_init_and_connect(v, 1000);

    VsockPacket p = packet(kVsockRequest, 1001);
    p.len = 100;
    dropped(s, v, "a header claiming 100 payload bytes the chain does not have", p);
    p.len = 0;
    p.payload.assign(100, 'x');
    dropped(s, v, "a header claiming none of the chain's 100 payload bytes", p);
    p.len = 0xffffffff;
    dropped(s, v, "a header claiming 4 GiB of payload", p);
    p.len = 64 * 1024 + 1;
    p.payload.assign(p.len, 'x');
    dropped(s, v, "64 KiB + 1 of payload, over the limit", p);
    p = packet(kVsockRequest, 1002);
    p.src_cid = 2;
    dropped(s, v, "a packet from the host's CID", p);
    p.src_cid = 0xffff'ffff'0000'0003ULL;
    dropped(s, v, "a source CID of the guest's in its low half only", p);
    p = packet(kVsockRequest, 1003);
    p.dst_cid = kGuestCid;
    dropped(s, v, "a packet to the guest itself", p);
    p.dst_cid = 0xffffffff;
    dropped(s, v, "a packet to VMADDR_CID_ANY", p);
    s.label("a header of 43 bytes");
    std::vector<uint8_t> header = packet(kVsockRequest, 1004).bytes();
    header.pop_back();
    send_split(v, header, {43});
    s.label("none of them was answered");
    s.delay(50);
    vsock_wait_rx_used(v, 1);  // the first connection's RESPONSE only

    s.label("a header split over three descriptors is a header");
    send_split(v, packet(kVsockRequest, 1005).bytes(), {1, 30, 13});
    vsock_wait_rx(v, kVsockResponse, 1005);
    s.label("a SEQPACKET request is refused, by a RST of its type");
    p = packet(kVsockRequest, 1006);
    p.type = 2;
    vsock_send(v, p);
    vsock_wait_rx(v, kVsockRst, 1006, kListeningPort, 2);
    for (uint16_t op : {uint16_t{kVsockRw}, uint16_t{kVsockShutdown}, uint16_t{0x63}}) {
      s.label("op " + std::to_string(op) + " on no stream gets a RST");
      vsock_send(v, packet(op, 1010 + op));
      vsock_wait_rx(v, kVsockRst, 1010 + op);
    }
    s.label("a REQUEST on a live stream resets it");
    vsock_send(v, packet(kVsockRequest, 1000));
    vsock_wait_rx(v, kVsockRst, 1000);
    vsock_wait_rx_used(v, 7);
    s.label("a connection still works");
    vsock_init_and_connect(v, 1100);
  });
}

TEST(HostileVsock, DataBeyondTheCreditAndLyingCreditEndTheStreamOrWait) {
  HostileVm vm;
  run_batch(vm, "virtio-vsock credit", [](Script& s, Drivers& d) {
    Driver& v = d.vsock;
    s.label("640 KiB to a host socket that never reads: more than the credit given");
    vsock_init_and_connect(v, 1200, kSilentPort);
    VsockPacket rw = packet(kVsockRw, 1200, kSilentPort);
    rw.len = 64 * 1024;
    rw.payload.assign(rw.len, 'd');
    for (int i = 0; i < 10; ++i) vsock_send(v, rw);
    vsock_wait_rx(v, kVsockRst, 1200, kSilentPort);

    s.label("RW after the guest's own SHUTDOWN of sending resets the stream");
    vsock_init_and_connect(v, 1201);
    VsockPacket shutdown = packet(kVsockShutdown, 1201);
    shutdown.flags = 2;  // VIRTIO_VSOCK_SHUTDOWN_SEND
    vsock_send(v, shutdown);
    VsockPacket late = packet(kVsockRw, 1201);
    late.len = 5;
    late.payload.assign(5, 'l');
    vsock_send(v, late);
    vsock_wait_rx(v, kVsockRst, 1201);

    s.label("a buffer of 4 GiB - 1: the host fills every rx buffer, then waits for more");
    vsock_init_and_connect(v, 1202, kGreetingPort, 0xffffffff);
    vsock_wait_rx_used(v, kRxBuffers);  // the RESPONSE, then data in every other buffer
    vsock_wait_rx(v, kVsockRw, 1202, kGreetingPort);

    s.label("a fwd_cnt ahead of what was sent: no data until the credit makes sense");
    vsock_init_and_connect(v, 1203, kGreetingPort, 64 * 1024, 0x8000'0000);
    s.delay(100);
    vsock_wait_rx_used(v, 1);
    vsock_send(v, packet(kVsockCreditUpdate, 1203, kGreetingPort));
    vsock_wait_rx(v, kVsockRw, 1203, kGreetingPort);

    s.label("a connection still works");
    vsock_init_and_connect(v, 1204);
  });
}

TEST(HostileVsock, FloodsAreBounded) {
  HostileVm vm;
  run_batch(vm, "virtio-vsock floods", [](Script& s, Drivers& d) {
    Driver& v = d.vsock;
    v.queue(kVsockTx).size = 256;
    const uint64_t buf = v.queue(kVsockTx).buffers;

    s.label("1024 requests to a closed port with no rx buffer, then 8 buffers");
    v.init();
    v.script().copy(buf, packet(kVsockRequest, 1300, kClosedPort).bytes());
    v.desc(kVsockTx, 0, buf, 44, 0);
    for (int round = 0; round < 4; ++round) {
      v.set_avail_idx(kVsockTx, static_cast<uint16_t>(v.queue(kVsockTx).avail_idx + 256));
      v.notify(kVsockTx);
      v.wait_used(kVsockTx, 256);
    }
    vsock_post_rx(v);
    vsock_wait_rx_used(v, kRxBuffers);
    vsock_wait_rx(v, kVsockRst, 1300, kClosedPort);

    s.label("256 connections at once");
    v.init();
    vsock_post_rx(v);
    for (uint16_t i = 0; i < 256; ++i) {
      const uint64_t at = buf + 64 * uint64_t{i};
      v.script().copy(at, packet(kVsockRequest, 2000 + i).bytes());
      v.desc(kVsockTx, i, at, 44, 0);
      v.publish(kVsockTx, i);
    }
    v.notify(kVsockTx);
    v.wait_used(kVsockTx, 256);
    vsock_wait_rx_used(v, kRxBuffers);

    s.label("200 credit requests on one stream");
    vsock_init_and_connect(v, 1301);
    v.script().copy(buf, packet(kVsockCreditRequest, 1301).bytes());
    for (int i = 0; i < 200; ++i) v.publish(kVsockTx, 0);
    v.notify(kVsockTx);
    v.wait_used(kVsockTx, 200);
    vsock_wait_rx(v, kVsockCreditUpdate, 1301);

    s.label("a connection still works");
    vsock_init_and_connect(v, 1302);
  });
}

TEST(HostileVsock, UnusableRxBuffersComeBackEmpty) {
  HostileVm vm;
  run_batch(vm, "virtio-vsock rx buffers", [](Script& s, Drivers& d) {
    Driver& v = d.vsock;
    const auto unusable = [&](const std::string& name, uint32_t len, uint16_t flags) {
      s.label(name);
      v.init();
      v.desc(kVsockRx, 0, vsock_rx_buffer(v, 0), len, flags);
      v.publish(kVsockRx, 0);
      v.notify(kVsockRx);
      vsock_send(v, packet(kVsockRequest, 1400, kClosedPort));
      vsock_wait_rx_used(v, 1);
      v.expect_used_elem(kVsockRx, 0, 0, 0);
      // The RST waited for a buffer it fits in.
      for (uint16_t i = 1; i < kRxBuffers; ++i) {
        v.desc(kVsockRx, i, vsock_rx_buffer(v, i), kRxBufferSize, kWrite);
        v.publish(kVsockRx, i);
      }
      v.notify(kVsockRx);
      vsock_wait_rx(v, kVsockRst, 1400, kClosedPort);
      vsock_connect(v, 1401);
    };
    unusable("an rx buffer the device may only read", kRxBufferSize, 0);
    unusable("an rx buffer shorter than a header", 43, kWrite);

    s.label("an rx buffer with room for a header only, while the host's data is owed");
    v.init();
    v.desc(kVsockRx, 0, vsock_rx_buffer(v, 0), 44, kWrite);
    v.publish(kVsockRx, 0);
    v.notify(kVsockRx);
    vsock_send(v, packet(kVsockRequest, 1402, kGreetingPort));
    vsock_wait_rx_used(v, 1);  // the RESPONSE fits
    v.desc(kVsockRx, 1, vsock_rx_buffer(v, 1), 44, kWrite);
    v.publish(kVsockRx, 1);
    v.notify(kVsockRx);
    s.delay(100);
    vsock_wait_rx_used(v, 1);  // the greeting does not: the device keeps the buffer
    s.label("a RST fits in it, and the greeting goes into the next full buffer");
    vsock_send(v, packet(kVsockRequest, 1403, kClosedPort));
    vsock_wait_rx_used(v, 2);
    for (uint16_t i = 2; i < kRxBuffers; ++i) {
      v.desc(kVsockRx, i, vsock_rx_buffer(v, i), kRxBufferSize, kWrite);
      v.publish(kVsockRx, i);
    }
    v.notify(kVsockRx);
    vsock_wait_rx(v, kVsockRw, 1402, kGreetingPort);
  });
}

}  // namespace
}  // namespace dsec::test::hostile

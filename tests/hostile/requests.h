// Valid requests to each device, as hostile-guest script: what a well-behaved driver
// does, and the answer the device must give. Every attack ends with one of these, to show
// the device still works.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "tests/hostile/driver.h"
#include "tests/hostile/vm.h"

namespace dsec::test::hostile {

// Device IDs (5).
inline constexpr uint32_t kNetId = 1;
inline constexpr uint32_t kBlockId = 2;
inline constexpr uint32_t kRngId = 4;
inline constexpr uint32_t kVsockId = 19;

// One driver per device of the machine, in its slot.
struct Drivers {
  Drivers(Script& script, const HostileVm& vm)
      : block(script, vm.block_slot(), kBlockId, 1),
        vsock(script, vm.vsock_slot(), kVsockId, 3),
        net(script, vm.net_slot(), kNetId, vm.has_net() ? 2 : 0),
        rng(script, vm.rng_slot(), kRngId, 1) {}
  Driver block;
  Driver vsock;
  Driver net;  // no queues unless the machine has net
  Driver rng;
};

// ---- virtio-rng: 64 random bytes into one writable buffer.
inline void rng_request(Driver& rng) {
  Script& s = rng.script();
  const uint64_t buf = rng.queue(0).buffers;
  s.fill(buf, 0, 64);
  rng.desc(0, 0, buf, 64, kWrite);
  rng.publish(0, 0);
  rng.notify(0);
  rng.wait_used(0);
  rng.expect_last_used(0, 0, 64);
  s.expect_not(buf, 0, 8);  // eight zero bytes from getrandom: one chance in 2^64
}

// ---- virtio-blk (5.2.6): header, data, status byte.
inline constexpr uint32_t kBlkIn = 0;
inline constexpr uint32_t kBlkOut = 1;
inline constexpr uint32_t kBlkFlush = 4;
inline constexpr uint32_t kBlkGetId = 8;
inline constexpr uint8_t kBlkOk = 0;
inline constexpr uint8_t kBlkIoErr = 1;
inline constexpr uint8_t kBlkUnsupp = 2;

// Where block requests keep their parts, in queue 0's buffer area.
struct BlockBuffers {
  uint64_t header;
  uint64_t data;    // 64 KiB
  uint64_t status;  // one byte
};
inline BlockBuffers block_buffers(Driver& blk) {
  const uint64_t base = blk.queue(0).buffers;
  return {base, base + 0x1000, base + 0x11000};
}
inline void write_block_header(Driver& blk, uint32_t type, uint64_t sector) {
  const BlockBuffers b = block_buffers(blk);
  blk.script().write(b.header, type, 8);  // type, then reserved 0
  blk.script().write(b.header + 8, sector, 8);
  blk.script().fill(b.status, 0xff, 1);
}
// A three-descriptor request (header, `data_len` bytes of data unless 0, status) at head 0;
// the device must return it with `used_len` and status byte `status`.
inline void block_request(Driver& blk, uint32_t type, uint64_t sector, uint32_t data_len,
                          uint8_t status, uint32_t used_len) {
  const BlockBuffers b = block_buffers(blk);
  write_block_header(blk, type, sector);
  const uint16_t data_flags = type == kBlkOut ? 0 : kWrite;
  if (data_len != 0) {
    blk.desc(0, 0, b.header, 16, kNext, 1);
    blk.desc(0, 1, b.data, data_len, data_flags | kNext, 2);
    blk.desc(0, 2, b.status, 1, kWrite);
  } else {
    blk.desc(0, 0, b.header, 16, kNext, 2);
    blk.desc(0, 2, b.status, 1, kWrite);
  }
  blk.publish(0, 0);
  blk.notify(0);
  blk.wait_used(0);
  blk.expect_last_used(0, 0, used_len);
  blk.script().expect(b.status, status, 1);
}
// Reads `sector` and checks the disk's pattern came back.
inline void block_read(Driver& blk, uint64_t sector) {
  blk.script().fill(block_buffers(blk).data, 0, 512);
  block_request(blk, kBlkIn, sector, 512, kBlkOk, 513);
  blk.script().expect(block_buffers(blk).data + 504, disk_word(sector), 8);
}

// ---- virtio-vsock (5.10.6): 44-byte headers; rx buffers of 4 KiB.
inline constexpr uint16_t kVsockRequest = 1;
inline constexpr uint16_t kVsockResponse = 2;
inline constexpr uint16_t kVsockRst = 3;
inline constexpr uint16_t kVsockShutdown = 4;
inline constexpr uint16_t kVsockRw = 5;
inline constexpr uint16_t kVsockCreditUpdate = 6;
inline constexpr uint16_t kVsockCreditRequest = 7;
inline constexpr uint16_t kVsockRx = 0;
inline constexpr uint16_t kVsockTx = 1;
inline constexpr uint32_t kRxBuffers = 8;
inline constexpr uint32_t kRxBufferSize = 0x1000;

struct VsockPacket {
  uint64_t src_cid = kGuestCid;
  uint64_t dst_cid = 2;
  uint32_t src_port = 0;
  uint32_t dst_port = kListeningPort;
  uint32_t len = 0;  // what the header claims
  uint16_t type = 1;
  uint16_t op = kVsockRequest;
  uint32_t flags = 0;
  uint32_t buf_alloc = 64 * 1024;
  uint32_t fwd_cnt = 0;
  std::vector<uint8_t> payload;  // what the chain carries after the header

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out(44);
    auto put = [&out](size_t at, auto value) {
      std::memcpy(out.data() + at, &value, sizeof(value));
    };
    put(0, src_cid);
    put(8, dst_cid);
    put(16, src_port);
    put(20, dst_port);
    put(24, len);
    put(28, type);
    put(30, op);
    put(32, flags);
    put(36, buf_alloc);
    put(40, fwd_cnt);
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }
};

inline uint64_t vsock_rx_buffer(Driver& vsock, uint32_t i) {
  return vsock.buffer(kVsockRx, i, kRxBufferSize);
}
// Gives the device kRxBuffers rx buffers (heads 0..kRxBuffers-1).
inline void vsock_post_rx(Driver& vsock) {
  vsock.post_writable(kVsockRx, kRxBuffers, kRxBufferSize);
}
// Sends `packet` as one readable buffer at head 0 of tx; the device returns it unwritten.
inline void vsock_send(Driver& vsock, const VsockPacket& packet) {
  vsock.send_readable(kVsockTx, packet.bytes());
}
// Waits for an rx buffer holding a packet `op` of `type` (1: stream) between `guest_port`
// and the host's `host_port`; for RW, of any length.
inline void vsock_wait_rx(Driver& vsock, uint16_t op, uint32_t guest_port,
                          uint32_t host_port = kListeningPort, uint16_t type = 1) {
  // Bytes 16-31 of the header: src_port, dst_port; len, type, op.
  vsock.script().wait_any16(vsock_rx_buffer(vsock, 0) + 16, kRxBuffers, kRxBufferSize,
                            {.value = host_port | uint64_t{guest_port} << 32,
                             .mask = kAllBits,
                             .value_hi = uint64_t{type} << 32 | uint64_t{op} << 48,
                             .mask_hi = op == kVsockRw ? 0xffffffff'00000000ULL : kAllBits});
}
// The rx used idx, counted from the last init, reaches `count` (an exact count: the wait
// fails if the device returned more).
inline void vsock_wait_rx_used(Driver& vsock, uint16_t count) {
  vsock.script().wait(vsock.queue(kVsockRx).used + 2, count, 2);
}
// A connection to a host port: it must be answered (RESPONSE).
inline void vsock_connect(Driver& vsock, uint32_t guest_port, uint32_t host_port = kListeningPort,
                          uint32_t buf_alloc = 64 * 1024, uint32_t fwd_cnt = 0) {
  VsockPacket request;
  request.src_port = guest_port;
  request.dst_port = host_port;
  request.buf_alloc = buf_alloc;
  request.fwd_cnt = fwd_cnt;
  vsock_send(vsock, request);
  vsock_wait_rx(vsock, kVsockResponse, guest_port, host_port);
}
inline void vsock_init_and_connect(Driver& vsock, uint32_t guest_port,
                                   uint32_t host_port = kListeningPort,
                                   uint32_t buf_alloc = 64 * 1024, uint32_t fwd_cnt = 0) {
  vsock.init();
  vsock_post_rx(vsock);
  vsock_connect(vsock, guest_port, host_port, buf_alloc, fwd_cnt);
}

// ---- virtio-net (5.1.6): a 12-byte header before every frame; rx buffers of 2 KiB.
inline constexpr uint16_t kNetRx = 0;
inline constexpr uint16_t kNetTx = 1;
inline constexpr uint32_t kNetRxBuffers = 8;
inline constexpr uint32_t kNetRxBufferSize = 0x800;
inline constexpr std::array<uint8_t, 6> kGuestMac{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};

// An ARP request from the guest's MAC and IP for the host's IP, after a zero net header.
inline std::vector<uint8_t> arp_request(const HostileVm& vm) {
  std::vector<uint8_t> f(12, 0);  // struct virtio_net_hdr, num_buffers included
  auto put = [&f](std::span<const uint8_t> bytes) {
    f.insert(f.end(), bytes.begin(), bytes.end());
  };
  auto be32 = [](uint32_t v) {
    return std::array<uint8_t, 4>{uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
  };
  put(std::array<uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  put(kGuestMac);
  put(std::array<uint8_t, 10>{0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1});  // ARP, who-has
  put(kGuestMac);
  put(be32(vm.guest_ip()));
  put(std::array<uint8_t, 6>{});
  put(be32(vm.host_ip()));
  return f;
}
inline uint64_t net_rx_buffer(Driver& net, uint32_t i) {
  return net.buffer(kNetRx, i, kNetRxBufferSize);
}
inline void net_post_rx(Driver& net) {
  net.post_writable(kNetRx, kNetRxBuffers, kNetRxBufferSize);
}
// Sends `frame` (header included) as one buffer at head 0 of tx.
inline void net_send(Driver& net, std::span<const uint8_t> frame) {
  net.send_readable(kNetTx, frame);
}
// The host's kernel answers the guest's ARP request through the TAP: an ARP reply (frame
// bytes 12-27: ethertype, htype, ptype, hlen, plen, op 2, the host's MAC) addressed to the
// guest lands in one of the rx buffers.
inline void net_arp(Driver& net, const HostileVm& vm) {
  net_send(net, arp_request(vm));
  net.script().wait_any16(
      net_rx_buffer(net, 0) + 12 + 12, kNetRxBuffers, kNetRxBufferSize,
      {.value = 0x0406'0008'0100'0608ULL, .mask = kAllBits, .value_hi = 0x0200, .mask_hi = 0xffff});
}
inline void net_init_and_arp(Driver& net, const HostileVm& vm) {
  net.init();
  net_post_rx(net);
  net_arp(net, vm);
}

}  // namespace dsec::test::hostile

// libFuzzer target: the vsock muxer and its connections' state (muxer.h, connection.h),
// driven by any sequence of guest packets, rx buffers, host connections and host socket
// events, and device resets, on a real event loop and real Unix sockets. Checked:
// - every packet the muxer puts in an rx buffer is from the host to the guest, a stream
//   packet with a known op, within the buffer, with a payload only for RW (or the reset
//   for a packet of another type, which carries that type);
// - the muxer never sends a stream more data than the guest's credit allows (its last
//   buf_alloc less what it sent beyond the guest's last fwd_cnt);
// - a host process that connects hears "OK <port>\n" first, a port of host-initiated
//   streams (from 2^30);
// - the number of streams stays within Muxer::kMaxConnections.
//
// Input: actions, each a u8 opcode (mod 8) and its arguments:
//   0 guest packet: u8 stream, u8 op, u8 flags, u32 buf_alloc, u32 fwd_cnt, u16 payload
//     length (mod 16 KiB), the payload
//   1 rx buffer: u16 capacity (mod 32 KiB), u8 pieces: fill_rx if a packet is owed
//   2 host connect: u8 guest port choice
//   3 host write: u8 socket, u16 length (mod 64 KiB), the bytes
//   4 host read: u8 socket (drains it)
//   5 host shutdown: u8 socket, u8 how
//   6 a turn of the event loop
//   7 a device reset
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "tests/fuzz/fuzz_input.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/virtio/chain_buffers.h"
#include "vmm/devices/virtio/vsock/connection.h"
#include "vmm/devices/virtio/vsock/muxer.h"
#include "vmm/devices/virtio/vsock/unix_socket.h"
#include "vmm/io/event_loop.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::UniqueFd;
using dsec::fuzz::check;
using dsec::fuzz::FuzzInput;
namespace virtio = dsec::virtio;
namespace vsock = dsec::virtio::vsock;

constexpr uint64_t kGuestCid = 3;
constexpr std::array<GuestRange, 2> kRam{{{0, 0x10000}, {0x20000, 0x10000}}};
constexpr uint64_t kPayloadAt = 0x0;  // tx payloads in the first region
constexpr uint64_t kRxAt = 0x20000;   // rx buffers in the second
// Host ports of guest-initiated streams: two with a listener, one without.
constexpr std::array<uint32_t, 3> kHostPorts{1, 2, 3};
constexpr std::array<uint32_t, 4> kGuestPorts{1024, 1025, 1026, 1027};

using Ports = std::pair<uint32_t, uint32_t>;  // (host port, guest port)

// What the guest told the muxer of its receive buffer, and what the muxer sent it since.
struct Credit {
  uint32_t buf_alloc = 0;
  uint32_t fwd_cnt = 0;
  uint32_t received = 0;
};

struct HostSocket {
  UniqueFd fd;
  bool host_initiated = false;  // it sent CONNECT: it must hear "OK <port>\n" first
  std::string heard;            // its first bytes, up to the OK line's end
};

struct Harness {
  Harness() {
    char dir[] = "/tmp/dsec-fuzz-muxer-XXXXXX";
    check(::mkdtemp(dir) != nullptr);
    uds = std::string(dir) + "/vsock.sock";
    for (size_t i = 0; i < 2; ++i) {
      listeners[i] =
          std::move(dsec::io::listen_unix(uds + "_" + std::to_string(kHostPorts[i])).value());
    }
    muxer = std::move(vsock::Muxer::create(loop, uds, kGuestCid, mutex, [] {}).value());
  }

  // Turns the loop, then takes the guest-initiated connections the listeners got.
  void turn() {
    check(loop.run_once(std::chrono::milliseconds(0)).has_value());
    for (UniqueFd& listener : listeners) {
      for (;;) {
        UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd) break;
        sockets.push_back({std::move(fd), false, {}});
      }
    }
  }

  void reset_device() {
    const std::lock_guard lock(mutex);
    muxer->deactivate();
    muxer->purge();
    muxer->activate();
    credit.clear();
  }

  dsec::io::EventLoop loop = std::move(dsec::io::EventLoop::create(256).value());
  std::mutex mutex;
  std::string uds;
  std::array<UniqueFd, 2> listeners;
  std::unique_ptr<vsock::Muxer> muxer;
  std::vector<HostSocket> sockets;
  std::map<Ports, Credit> credit;
};

Ports stream_ports(uint8_t choice) {
  const uint32_t guest_port = kGuestPorts[choice % kGuestPorts.size()];
  choice /= kGuestPorts.size();
  // Guest-initiated streams to kHostPorts, or host-initiated ones (ports from 2^30).
  const uint32_t host_port = choice % 2 == 0 ? kHostPorts[(choice / 2) % kHostPorts.size()]
                                             : vsock::Muxer::kFirstLocalPort + (choice / 2) % 4;
  return {host_port, guest_port};
}

// Up to `pieces` buffers covering [base, base + len).
std::vector<GuestRange> split(uint64_t base, uint64_t len, uint8_t pieces) {
  std::vector<GuestRange> out;
  const uint64_t n = 1 + pieces % 3;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t size = i + 1 == n ? len : len / n;
    out.push_back({base, size});
    base += size;
    len -= size;
  }
  return out;
}

void guest_packet(Harness& h, GuestMemory& mem, FuzzInput& in) {
  const Ports ports = stream_ports(in.take<uint8_t>());
  vsock::VsockHeader header{.src_cid = kGuestCid,
                            .dst_cid = vsock::kHostCid,
                            .src_port = ports.second,
                            .dst_port = ports.first,
                            .len = 0,
                            .type = vsock::kTypeStream,
                            .op = static_cast<uint16_t>(in.take<uint8_t>() % 9),
                            .flags = in.take<uint8_t>(),
                            .buf_alloc = in.take<uint32_t>(),
                            .fwd_cnt = in.take<uint32_t>()};
  if (header.flags >= 0x80) header.type = header.flags;  // now and then, not a stream
  const auto payload = in.take_bytes(in.take<uint16_t>() % 0x4000);
  check(mem.write(kPayloadAt, payload).has_value());
  header.len = static_cast<uint32_t>(payload.size());  // parse_tx_packet() checked that
  const vsock::TxPacket packet{header, split(kPayloadAt, payload.size(), header.flags)};
  if (header.type == vsock::kTypeStream) {  // a packet of another type is no stream's
    if (header.op == vsock::kOpRequest || header.op == vsock::kOpRst) {
      h.credit[ports] = {};  // a new stream, or the end of one
    }
    Credit& c = h.credit[ports];
    c.buf_alloc = header.buf_alloc;
    c.fwd_cnt = header.fwd_cnt;
  }
  const std::lock_guard lock(h.mutex);
  h.muxer->on_guest_packet(mem, packet);
  check(h.muxer->connection_count() <= vsock::Muxer::kMaxConnections);
}

void rx_buffer(Harness& h, GuestMemory& mem, FuzzInput& in) {
  const uint32_t capacity = in.take<uint16_t>() % 0x8000;
  const uint8_t pieces = in.take<uint8_t>();
  const virtio::DescriptorChain chain{
      .head = 0, .readable = {}, .writable = split(kRxAt, capacity, pieces)};
  const std::lock_guard lock(h.mutex);
  if (!h.muxer->has_rx()) return;
  check(mem.fill(kRxAt, capacity, 0xee).has_value());
  const auto written = h.muxer->fill_rx(mem, chain);
  if (!written) {
    check(capacity < vsock::kHeaderSize);  // the only chain fill_rx refuses here
    return;
  }
  if (*written == 0) return;  // nothing was owed after all
  check(*written >= vsock::kHeaderSize && *written <= capacity);
  std::array<uint8_t, vsock::kHeaderSize> bytes{};
  check(virtio::read_buffers(mem, chain.writable, bytes).has_value());
  const vsock::VsockHeader p = vsock::decode_header(bytes);
  check(p.src_cid == vsock::kHostCid && p.dst_cid == kGuestCid);
  if (p.type != vsock::kTypeStream) {
    // The reset for a packet of another type carries that type, and ends no stream.
    check(p.op == vsock::kOpRst && p.len == 0 && p.buf_alloc == 0 &&
          *written == vsock::kHeaderSize);
    return;
  }
  check(p.op >= vsock::kOpRequest && p.op <= vsock::kOpCreditUpdate);
  check(*written == vsock::kHeaderSize + p.len);
  // A stream's packets show its buffer; a RST for a packet that matched no stream, none.
  check(p.buf_alloc == vsock::Connection::kBufAlloc || (p.op == vsock::kOpRst && p.buf_alloc == 0));
  const Ports ports{p.src_port, p.dst_port};
  if (p.op == vsock::kOpRw) {
    check(p.len != 0);
    auto it = h.credit.find(ports);
    check(it != h.credit.end());  // a stream the guest or the host opened
    Credit& c = it->second;
    c.received += p.len;
    check(static_cast<uint32_t>(c.received - c.fwd_cnt) <= c.buf_alloc);
  } else {
    check(p.len == 0);
  }
  if (p.op == vsock::kOpRequest) {
    h.credit[ports].received = 0;  // a host-initiated stream: nothing sent on it yet
  } else if (p.op == vsock::kOpRst) {
    h.credit.erase(ports);
  }
}

void host_connect(Harness& h, FuzzInput& in) {
  const uint32_t port = kGuestPorts[in.take<uint8_t>() % kGuestPorts.size()];
  auto fd = dsec::io::connect_unix(h.uds);
  if (!fd) return;  // out of fds, or the listener's backlog is full
  const std::string line = "CONNECT " + std::to_string(port) + "\n";
  if (::send(fd->get(), line.data(), line.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(line.size())) {
    h.sockets.push_back({std::move(*fd), true, {}});
  }
}

HostSocket* pick(Harness& h, FuzzInput& in) {
  const uint8_t choice = in.take<uint8_t>();
  return h.sockets.empty() ? nullptr : &h.sockets[choice % h.sockets.size()];
}

// "OK <port>\n" with a port of host-initiated streams, or the start of one.
bool ok_line_so_far(const std::string& heard) {
  if (heard.compare(0, std::min<size_t>(heard.size(), 3), "OK ", 0,
                    std::min<size_t>(heard.size(), 3)) != 0) {
    return false;
  }
  uint64_t port = 0;
  size_t i = 3;
  for (; i < heard.size() && heard[i] >= '0' && heard[i] <= '9' && i < 14; ++i) {
    port = port * 10 + static_cast<uint64_t>(heard[i] - '0');
  }
  if (i == heard.size()) return i < 14;  // the line is not whole yet
  return heard[i] == '\n' && i == heard.size() - 1 && port >= vsock::Muxer::kFirstLocalPort &&
         port <= UINT32_MAX;
}

void host_read(HostSocket& s) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(s.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    const std::string_view got(buf, static_cast<size_t>(n));
    if (s.host_initiated && (s.heard.empty() || s.heard.back() != '\n')) {
      const size_t line = got.find('\n');
      s.heard.append(got.substr(0, line == std::string_view::npos ? got.size() : line + 1));
      check(ok_line_so_far(s.heard));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
  FuzzInput in({data, size});
  {
    const std::lock_guard lock(h.mutex);
    h.muxer->set_next_local_port(vsock::Muxer::kFirstLocalPort);
    h.muxer->activate();
  }
  while (!in.empty()) {
    switch (in.take<uint8_t>() % 8) {
      case 0:
        guest_packet(h, mem, in);
        break;
      case 1:
        rx_buffer(h, mem, in);
        break;
      case 2:
        host_connect(h, in);
        break;
      case 3:
        if (HostSocket* s = pick(h, in)) {
          const auto bytes = in.take_bytes(in.take<uint16_t>());
          (void)::send(s->fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        break;
      case 4:
        if (HostSocket* s = pick(h, in)) host_read(*s);
        break;
      case 5:
        if (HostSocket* s = pick(h, in)) {
          ::shutdown(s->fd.get(), in.take<uint8_t>() % 3);  // SHUT_RD, SHUT_WR or SHUT_RDWR
        }
        break;
      case 6:
        h.turn();
        break;
      case 7:
        h.reset_device();
        break;
    }
  }
  for (HostSocket& s : h.sockets) host_read(s);
  // The next input starts from a device reset, with no host sockets.
  h.reset_device();
  h.sockets.clear();
  for (int i = 0; i < 4; ++i) h.turn();
  h.sockets.clear();
  return 0;
}

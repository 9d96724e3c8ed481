#include "vmm/devices/virtio/vsock/packet.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "vmm/devices/virtio/chain_buffers.h"

namespace dsec::virtio::vsock {
namespace {

template <typename T>
void put(std::array<uint8_t, kHeaderSize>& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof(T));  // little-endian host (virtio_spec.h)
}

template <typename T>
T get(std::span<const uint8_t, kHeaderSize> in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

}  // namespace

std::array<uint8_t, kHeaderSize> encode_header(const VsockHeader& h) {
  std::array<uint8_t, kHeaderSize> out{};
  put(out, 0, h.src_cid);
  put(out, 8, h.dst_cid);
  put(out, 16, h.src_port);
  put(out, 20, h.dst_port);
  put(out, 24, h.len);
  put(out, 28, h.type);
  put(out, 30, h.op);
  put(out, 32, h.flags);
  put(out, 36, h.buf_alloc);
  put(out, 40, h.fwd_cnt);
  return out;
}

VsockHeader decode_header(std::span<const uint8_t, kHeaderSize> in) {
  return {.src_cid = get<uint64_t>(in, 0),
          .dst_cid = get<uint64_t>(in, 8),
          .src_port = get<uint32_t>(in, 16),
          .dst_port = get<uint32_t>(in, 20),
          .len = get<uint32_t>(in, 24),
          .type = get<uint16_t>(in, 28),
          .op = get<uint16_t>(in, 30),
          .flags = get<uint32_t>(in, 32),
          .buf_alloc = get<uint32_t>(in, 36),
          .fwd_cnt = get<uint32_t>(in, 40)};
}

Result<TxPacket> parse_tx_packet(const GuestMemory& memory, const DescriptorChain& chain,
                                 uint64_t guest_cid) {
  const uint64_t readable = chain.readable_bytes();
  if (readable < kHeaderSize) {
    return fail(
        fmt::format("vsock: tx chain {} has {} readable bytes, less than the {}-byte header",
                    chain.head, readable, kHeaderSize));
  }
  std::array<uint8_t, kHeaderSize> bytes{};
  DSEC_TRY(read_buffers(memory, chain.readable, bytes));
  TxPacket packet{.header = decode_header(bytes), .payload = {}};
  const VsockHeader& h = packet.header;
  if (h.len > kMaxPayload) {
    return fail(fmt::format("vsock: tx chain {}: payload length {} is above the {}-byte limit",
                            chain.head, h.len, kMaxPayload));
  }
  if (h.len != readable - kHeaderSize) {
    return fail(fmt::format("vsock: tx chain {}: header says {} payload bytes, the chain holds {}",
                            chain.head, h.len, readable - kHeaderSize));
  }
  if (h.src_cid != guest_cid) {
    return fail(fmt::format("vsock: tx chain {}: source CID {} is not the guest's ({})", chain.head,
                            h.src_cid, guest_cid));
  }
  if (h.dst_cid != kHostCid) {
    return fail(fmt::format("vsock: tx chain {}: destination CID {} is not the host's ({})",
                            chain.head, h.dst_cid, kHostCid));
  }
  packet.payload = slice_buffers(chain.readable, kHeaderSize);
  return packet;
}

Result<uint32_t> rx_payload_capacity(const DescriptorChain& chain) {
  if (!chain.readable.empty()) {
    return fail(fmt::format("vsock: rx chain {} has device-readable buffers", chain.head));
  }
  const uint64_t writable = chain.writable_bytes();
  if (writable < kHeaderSize) {
    return fail(
        fmt::format("vsock: rx chain {} has {} writable bytes, less than the {}-byte header",
                    chain.head, writable, kHeaderSize));
  }
  return static_cast<uint32_t>(std::min<uint64_t>(writable - kHeaderSize, kMaxPayload));
}

Result<std::vector<iovec>> rx_payload_iovecs(GuestMemory& memory, const DescriptorChain& chain,
                                             uint32_t len) {
  const uint32_t capacity = DSEC_TRY(rx_payload_capacity(chain));
  return host_iovecs(memory, slice_buffers(chain.writable, kHeaderSize, std::min(len, capacity)));
}

Result<uint32_t> write_rx_header(GuestMemory& memory, const DescriptorChain& chain,
                                 const VsockHeader& header) {
  const uint32_t capacity = DSEC_TRY(rx_payload_capacity(chain));
  if (header.len > capacity) {
    return fail(fmt::format("vsock: rx chain {} takes {} payload bytes, not {}", chain.head,
                            capacity, header.len));
  }
  DSEC_TRY(write_buffers(memory, chain.writable, encode_header(header)));
  return kHeaderSize + header.len;
}

Result<uint32_t> write_rx_packet(GuestMemory& memory, const DescriptorChain& chain,
                                 VsockHeader header, std::span<const uint8_t> data) {
  const uint32_t capacity = DSEC_TRY(rx_payload_capacity(chain));
  if (data.size() > capacity) {
    return fail(fmt::format("vsock: rx chain {} takes {} payload bytes, not {}", chain.head,
                            capacity, data.size()));
  }
  header.len = static_cast<uint32_t>(data.size());
  DSEC_TRY(write_buffers(memory, slice_buffers(chain.writable, kHeaderSize), data));
  return write_rx_header(memory, chain, header);
}

}  // namespace dsec::virtio::vsock

// libFuzzer target: virtio-vsock packets. The fuzzer writes guest memory and chooses a
// chain's buffers (up to 8, readable or writable, anywhere, some outside RAM); the chain
// is parsed as a tx packet, and used as an rx chain for a header and a payload. Any crash,
// sanitizer report, or accepted packet or rx capacity that breaks a documented check is a
// bug.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "vmm/devices/virtio/vsock/packet.h"
#include "vmm/memory/guest_memory.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::fuzz::check;
using dsec::virtio::DescriptorChain;
namespace vsock = dsec::virtio::vsock;

// Two RAM regions with a hole between them.
constexpr std::array<GuestRange, 2> kRam{{{0, 0x20000}, {0x30000, 0x20000}}};
constexpr uint64_t kGuestCid = 3;

struct Buffer {
  uint32_t addr;
  uint32_t len;  // bit 31: device-writable
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) {
    return -1;
  }
  const size_t count = std::min<size_t>(data[0] % 9, (size - 1) / sizeof(Buffer));
  DescriptorChain chain;
  const uint8_t* at = data + 1;
  for (size_t i = 0; i < count; ++i, at += sizeof(Buffer)) {
    Buffer b{};
    std::memcpy(&b, at, sizeof(b));
    const GuestRange range{b.addr % 0x60000, (b.len & 0x7fffffff) % 0x12000};
    (b.len >> 31 ? chain.writable : chain.readable).push_back(range);
  }
  GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
  // The rest fills guest memory from its start, the header's likely home; what an earlier
  // input wrote there is zeroed, so that each input runs alone.
  dsec::fuzz::fill_guest_memory(mem, kRam, std::span<const uint8_t>(at, data + size));

  if (auto packet = vsock::parse_tx_packet(mem, chain, kGuestCid)) {
    check(packet->header.len <= vsock::kMaxPayload);
    check(packet->header.src_cid == kGuestCid && packet->header.dst_cid == vsock::kHostCid);
    uint64_t payload = 0;
    for (const GuestRange& r : packet->payload) {
      payload += r.size;
    }
    check(payload == packet->header.len);
    check(payload + vsock::kHeaderSize == chain.readable_bytes());
  }

  if (auto capacity = vsock::rx_payload_capacity(chain)) {
    check(chain.readable.empty() && chain.writable_bytes() >= vsock::kHeaderSize);
    check(*capacity <= vsock::kMaxPayload);
    std::array<uint8_t, 64> bytes{};
    std::fill(bytes.begin(), bytes.end(), 0x5a);
    const size_t n = std::min<size_t>(*capacity, bytes.size());
    auto used = vsock::write_rx_packet(mem, chain, {}, std::span(bytes).first(n));
    if (used) {
      check(*used == vsock::kHeaderSize + n);
    }
    auto iovecs = vsock::rx_payload_iovecs(mem, chain, UINT32_MAX);
    if (iovecs) {
      uint64_t total = 0;
      for (const iovec& v : *iovecs) {
        total += v.iov_len;
      }
      check(total <= *capacity);
    }
  }
  return 0;
}

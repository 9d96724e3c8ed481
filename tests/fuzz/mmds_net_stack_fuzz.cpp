// libFuzzer target: the MMDS network stack (vmm/mmds/net_stack.h) fed a guest's frames.
// Each frame is the fuzzer's, with its Ethernet, IPv4 and TCP headers made to reach the
// stack (the MMDS address, port 80, valid checksums) when the input's first byte of it
// says so, so that the TCP endpoint and the HTTP parser behind it are reached, not only
// the checksums. Checked: every frame the stack sends parses as an ARP reply or a TCP
// segment with valid checksums, and the connection table stays within its bound.
//
// Input: a sequence of frames, each a u8 mode (bit 0: build TCP headers around the bytes
// as a segment from the guest, with u16 source port, u32 seq, u32 ack, u8 flags from the
// input; otherwise the bytes are the whole frame), u16 length, the bytes.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_input.h"
#include "vmm/mmds/net_stack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsec::mmds;
  auto mmds = std::make_shared<Mmds>();
  mmds->configure(size > 0 && (data[0] & 0x80) != 0 ? MmdsVersion::kV2 : MmdsVersion::kV1,
                  false);
  (void)mmds->put(R"({"latest":{"meta-data":{"id":"vm","n":1,"list":["a"]}}})");
  NetStack stack(mmds, kDefaultIpv4Address);
  dsec::fuzz::FuzzInput in({data, size});
  const auto now = Mmds::Clock::time_point() + std::chrono::seconds(10);
  while (!in.empty()) {
    const uint8_t mode = in.take<uint8_t>();
    std::vector<uint8_t> frame;
    if ((mode & 1) != 0) {
      TcpOut out{.source_mac = {0x52, 0x54, 0, 0x12, 0x34, 0x56},
                 .destination_mac = kMmdsMac,
                 .source_ip = {10, 0, 0, 2},
                 .destination_ip = kDefaultIpv4Address,
                 .source_port = static_cast<uint16_t>(1000 + in.take<uint8_t>() % 20),
                 .destination_port = (mode & 2) != 0 ? uint16_t{81} : uint16_t{80},
                 .seq = in.take<uint32_t>(),
                 .ack = in.take<uint32_t>(),
                 .flags = in.take<uint8_t>(),
                 .window = in.take<uint16_t>()};
      const auto payload = in.take_bytes(in.take<uint16_t>() % 2048);
      frame = build_tcp_frame(out, payload);
    } else {
      const auto bytes = in.take_bytes(in.take<uint16_t>() % 2048);
      frame.assign(bytes.begin(), bytes.end());
    }
    (void)stack.detour(frame, now);
    while (auto reply = stack.next_frame()) {
      const auto ethernet = parse_ethernet(*reply);
      if (!ethernet) {
        std::abort();
      }
      if (ethernet->ether_type == kEtherTypeArp) {
        if (!parse_arp(ethernet->payload)) {
          std::abort();
        }
        continue;
      }
      const auto packet = parse_ipv4(ethernet->payload);
      if (!packet || !parse_tcp(*packet)) {
        std::abort();
      }
    }
    if (stack.connection_count() > NetStack::kMaxConnections) {
      std::abort();
    }
  }
  return 0;
}

#include "vmm/mmds/frames.h"

#include <algorithm>
#include <cstring>

namespace dsec::mmds {
namespace {

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}

template <size_t N>
std::array<uint8_t, N> take(const uint8_t* p) {
  std::array<uint8_t, N> out{};
  std::copy(p, p + N, out.begin());
  return out;
}

// The TCP pseudo-header's sum (RFC 793 3.1).
uint32_t pseudo_header_sum(const Ipv4Address& source, const Ipv4Address& destination,
                           size_t tcp_length) {
  std::array<uint8_t, 12> pseudo{};
  std::copy(source.begin(), source.end(), pseudo.begin());
  std::copy(destination.begin(), destination.end(), pseudo.begin() + 4);
  pseudo[9] = kProtocolTcp;
  put16(pseudo.data() + 10, static_cast<uint16_t>(tcp_length));
  return checksum_add(pseudo);
}

constexpr size_t kIpv4Header = 20;
constexpr size_t kTcpHeader = 20;
constexpr size_t kArpLength = 28;

}  // namespace

uint32_t checksum_add(std::span<const uint8_t> bytes, uint32_t initial) {
  uint64_t sum = initial;
  size_t i = 0;
  for (; i + 1 < bytes.size(); i += 2) {
    sum += be16(bytes.data() + i);
  }
  if (i < bytes.size()) {
    sum += uint32_t{bytes[i]} << 8;
  }
  while ((sum >> 16) != 0) {
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<uint32_t>(sum);
}

uint16_t checksum_finish(uint32_t sum) {
  while ((sum >> 16) != 0) {
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<uint16_t>(~sum);
}

void complete_partial_checksum(std::span<uint8_t> frame, size_t start, size_t offset) {
  if (start > frame.size() || offset > frame.size() - start || frame.size() - start - offset < 2) {
    return;
  }
  put16(frame.data() + start + offset, checksum_finish(checksum_add(frame.subspan(start))));
}

std::optional<EthernetFrame> parse_ethernet(std::span<const uint8_t> frame) {
  if (frame.size() < kEthernetHeader) {
    return std::nullopt;
  }
  return EthernetFrame{take<6>(frame.data()), take<6>(frame.data() + 6),
                       be16(frame.data() + 12), frame.subspan(kEthernetHeader)};
}

std::optional<ArpPacket> parse_arp(std::span<const uint8_t> payload) {
  // Ethernet hardware (1), IPv4 protocol, 6- and 4-byte addresses.
  if (payload.size() < kArpLength || be16(payload.data()) != 1 ||
      be16(payload.data() + 2) != kEtherTypeIpv4 || payload[4] != 6 || payload[5] != 4) {
    return std::nullopt;
  }
  const uint8_t* p = payload.data();
  return ArpPacket{be16(p + 6), take<6>(p + 8), take<4>(p + 14), take<6>(p + 18),
                   take<4>(p + 24)};
}

std::optional<Ipv4Packet> parse_ipv4(std::span<const uint8_t> payload) {
  if (payload.size() < kIpv4Header || (payload[0] >> 4) != 4) {
    return std::nullopt;
  }
  const size_t header = size_t{payload[0] & 0x0fu} * 4;
  const size_t total = be16(payload.data() + 2);
  if (header < kIpv4Header || total < header || total > payload.size() ||
      checksum_finish(checksum_add(payload.first(header))) != 0) {
    return std::nullopt;
  }
  const uint16_t fragment = be16(payload.data() + 6);
  Ipv4Packet packet;
  packet.protocol = payload[9];
  packet.source = take<4>(payload.data() + 12);
  packet.destination = take<4>(payload.data() + 16);
  packet.fragment = (fragment & 0x2000) != 0 || (fragment & 0x1fff) != 0;
  packet.payload = payload.subspan(header, total - header);  // Ethernet padding dropped
  return packet;
}

std::optional<TcpSegment> parse_tcp(const Ipv4Packet& packet) {
  const auto bytes = packet.payload;
  if (bytes.size() < kTcpHeader) {
    return std::nullopt;
  }
  const size_t header = (static_cast<size_t>(bytes[12]) >> 4) * 4;
  if (header < kTcpHeader || header > bytes.size() ||
      checksum_finish(checksum_add(
          bytes, pseudo_header_sum(packet.source, packet.destination, bytes.size()))) != 0) {
    return std::nullopt;
  }
  TcpSegment segment;
  segment.source_port = be16(bytes.data());
  segment.destination_port = be16(bytes.data() + 2);
  segment.seq = be32(bytes.data() + 4);
  segment.ack = be32(bytes.data() + 8);
  segment.flags = bytes[13] & 0x3f;
  segment.window = be16(bytes.data() + 14);
  segment.payload = bytes.subspan(header);
  // Options: only MSS is read; the rest (window scale, timestamps, SACK) are not echoed on
  // our SYN-ACK, so the guest uses none of them.
  for (size_t i = kTcpHeader; i < header;) {
    const uint8_t kind = bytes[i];
    if (kind == 0) {
      break;
    }
    if (kind == 1) {
      ++i;
      continue;
    }
    if (i + 1 >= header || bytes[i + 1] < 2 || i + bytes[i + 1] > header) {
      return std::nullopt;
    }
    if (kind == 2 && bytes[i + 1] == 4) {
      segment.mss = be16(bytes.data() + i + 2);
    }
    i += bytes[i + 1];
  }
  return segment;
}

std::vector<uint8_t> build_tcp_frame(const TcpOut& out, std::span<const uint8_t> payload) {
  const size_t tcp_header = kTcpHeader + (out.mss ? 4 : 0);
  const size_t tcp_length = tcp_header + payload.size();
  std::vector<uint8_t> frame(kEthernetHeader + kIpv4Header + tcp_length);
  uint8_t* eth = frame.data();
  std::copy(out.destination_mac.begin(), out.destination_mac.end(), eth);
  std::copy(out.source_mac.begin(), out.source_mac.end(), eth + 6);
  put16(eth + 12, kEtherTypeIpv4);
  uint8_t* ip = eth + kEthernetHeader;
  ip[0] = 0x45;
  put16(ip + 2, static_cast<uint16_t>(kIpv4Header + tcp_length));
  put16(ip + 6, 0x4000);  // don't fragment
  ip[8] = 64;
  ip[9] = kProtocolTcp;
  std::copy(out.source_ip.begin(), out.source_ip.end(), ip + 12);
  std::copy(out.destination_ip.begin(), out.destination_ip.end(), ip + 16);
  put16(ip + 10, checksum_finish(checksum_add(std::span<const uint8_t>(ip, kIpv4Header))));
  uint8_t* tcp = ip + kIpv4Header;
  put16(tcp, out.source_port);
  put16(tcp + 2, out.destination_port);
  put32(tcp + 4, out.seq);
  put32(tcp + 8, out.ack);
  tcp[12] = static_cast<uint8_t>((tcp_header / 4) << 4);
  tcp[13] = out.flags;
  put16(tcp + 14, out.window);
  if (out.mss) {
    tcp[20] = 2;
    tcp[21] = 4;
    put16(tcp + 22, *out.mss);
  }
  std::copy(payload.begin(), payload.end(), tcp + tcp_header);
  const uint32_t sum = checksum_add(std::span<const uint8_t>(tcp, tcp_length),
                                    pseudo_header_sum(out.source_ip, out.destination_ip,
                                                      tcp_length));
  put16(tcp + 16, checksum_finish(sum));
  return frame;
}

std::vector<uint8_t> build_arp_reply(const MacAddr& own_mac, const Ipv4Address& own_ip,
                                     const ArpPacket& request) {
  std::vector<uint8_t> frame(kEthernetHeader + kArpLength);
  uint8_t* p = frame.data();
  std::copy(request.sender_mac.begin(), request.sender_mac.end(), p);
  std::copy(own_mac.begin(), own_mac.end(), p + 6);
  put16(p + 12, kEtherTypeArp);
  uint8_t* arp = p + kEthernetHeader;
  put16(arp, 1);
  put16(arp + 2, kEtherTypeIpv4);
  arp[4] = 6;
  arp[5] = 4;
  put16(arp + 6, 2);  // reply
  std::copy(own_mac.begin(), own_mac.end(), arp + 8);
  std::copy(own_ip.begin(), own_ip.end(), arp + 14);
  std::copy(request.sender_mac.begin(), request.sender_mac.end(), arp + 18);
  std::copy(request.sender_ip.begin(), request.sender_ip.end(), arp + 24);
  return frame;
}

}  // namespace dsec::mmds

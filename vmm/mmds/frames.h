// The few Ethernet, ARP, IPv4 and TCP headers the MMDS network stack reads and writes
// (RFC 826, 791, 793). Every frame comes from the guest: each parse checks every length
// and offset against the frame, and refuses (nullopt) what it does not take: IPv4
// options, fragments, bad checksums.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vmm/mmds/mmds_config.h"

namespace dsec::mmds {

using MacAddr = std::array<uint8_t, 6>;

inline constexpr size_t kEthernetHeader = 14;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint8_t kProtocolTcp = 6;

namespace tcp_flags {
inline constexpr uint8_t kFin = 0x01;
inline constexpr uint8_t kSyn = 0x02;
inline constexpr uint8_t kRst = 0x04;
inline constexpr uint8_t kPsh = 0x08;
inline constexpr uint8_t kAck = 0x10;
}  // namespace tcp_flags

struct EthernetFrame {
  MacAddr destination{};
  MacAddr source{};
  uint16_t ether_type = 0;
  std::span<const uint8_t> payload;
};
std::optional<EthernetFrame> parse_ethernet(std::span<const uint8_t> frame);

// An Ethernet/IPv4 ARP request or reply.
struct ArpPacket {
  uint16_t operation = 0;  // 1 request, 2 reply
  MacAddr sender_mac{};
  Ipv4Address sender_ip{};
  MacAddr target_mac{};
  Ipv4Address target_ip{};
};
std::optional<ArpPacket> parse_arp(std::span<const uint8_t> payload);

struct Ipv4Packet {
  Ipv4Address source{};
  Ipv4Address destination{};
  uint8_t protocol = 0;
  bool fragment = false;  // MF set or a fragment offset
  std::span<const uint8_t> payload;
};
// The header's checksum must hold and its lengths fit the frame.
std::optional<Ipv4Packet> parse_ipv4(std::span<const uint8_t> payload);

struct TcpSegment {
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint8_t flags = 0;
  uint16_t window = 0;
  std::optional<uint16_t> mss;  // the MSS option, on a SYN
  std::span<const uint8_t> payload;
};
// `packet`'s TCP segment; its checksum (with the pseudo-header) must hold.
std::optional<TcpSegment> parse_tcp(const Ipv4Packet& packet);

// Ethernet + IPv4 (TTL 64, DF) + TCP (no options, or MSS `mss` when given) + `payload`.
struct TcpOut {
  MacAddr source_mac{};
  MacAddr destination_mac{};
  Ipv4Address source_ip{};
  Ipv4Address destination_ip{};
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint8_t flags = 0;
  uint16_t window = 0;
  std::optional<uint16_t> mss{};
};
std::vector<uint8_t> build_tcp_frame(const TcpOut& out, std::span<const uint8_t> payload);

std::vector<uint8_t> build_arp_reply(const MacAddr& own_mac, const Ipv4Address& own_ip,
                                     const ArpPacket& request);

// RFC 1071's ones' complement sum, folded, not inverted; `initial` carries a partial sum.
uint32_t checksum_add(std::span<const uint8_t> bytes, uint32_t initial = 0);
uint16_t checksum_finish(uint32_t sum);
// What a NIC does for a frame whose driver left the checksum to it (virtio-net's
// VIRTIO_NET_HDR_F_NEEDS_CSUM): the one's complement sum of the bytes from `start` to the
// end, the field at start + offset holding the pseudo-header's sum, is stored there. A
// field past the end, or a start past it, leaves the frame as it is (its checksum then
// fails wherever it is checked).
void complete_partial_checksum(std::span<uint8_t> frame, size_t start, size_t offset);

}  // namespace dsec::mmds

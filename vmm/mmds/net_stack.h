// The MMDS network stack (Firecracker's "dumbo"): on a network interface that MMDS is
// enabled on, the frames the guest sends to the MMDS address are answered here and never
// reach the TAP. ARP requests for the address get a reply from kMmdsMac; TCP to port 80
// is a minimal endpoint serving HTTP/1.1 from mmds::Mmds; IPv4 to the address that is
// neither is dropped. What it sends waits in this object until the device has an rx
// buffer for it (next_frame()); nothing is lost, so nothing is retransmitted.
//
// The endpoint's limits, since every byte is the guest's: kMaxConnections at once (a new
// one evicts the longest idle), in-order segments only (the guest retransmits what came
// early), kMaxRequestBytes of a request (head and body) unanswered, one response in flight
// per connection (the next request is read once it is acknowledged), kMaxPendingFrames
// control frames queued (ARP replies, RSTs: more are dropped, and the guest asks again).
// TCP options: only the guest's MSS is read, and our SYN-ACK offers an MSS; no window
// scaling, timestamps or SACK. A segment for no connection, or to another port, gets a
// RST. A malformed request is answered 400 and the connection closed.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vmm/mmds/frames.h"
#include "vmm/mmds/mmds.h"

namespace dsec::mmds {

// Firecracker's MMDS MAC address.
inline constexpr MacAddr kMmdsMac{0x06, 0x01, 0x23, 0x45, 0x67, 0x01};

class NetStack {
 public:
  static constexpr size_t kMaxConnections = 16;
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxPendingFrames = 64;
  static constexpr uint16_t kPort = 80;
  static constexpr uint16_t kOwnMss = 1460;

  NetStack(std::shared_ptr<Mmds> mmds, const Ipv4Address& address);

  // A frame the guest sent: true when it was for the MMDS (taken here), false when it goes
  // to the TAP.
  bool detour(std::span<const uint8_t> frame, Mmds::Clock::time_point now);
  // The next frame for the guest, if any.
  std::optional<std::vector<uint8_t>> next_frame();
  bool has_frame() const;
  size_t connection_count() const { return connections_.size(); }

 private:
  struct Key {
    Ipv4Address ip;
    uint16_t port;
    auto operator<=>(const Key&) const = default;
  };
  struct Connection {
    MacAddr peer_mac{};
    uint32_t iss = 0;      // our initial sequence number (the SYN-ACK's)
    uint32_t rcv_nxt = 0;  // the next byte expected from the guest
    uint32_t snd_una = 0;  // `out` begins at this sequence number
    uint32_t snd_nxt = 0;  // the next byte to send
    uint16_t peer_window = 0;
    uint16_t mss = 536;
    bool established = false;
    bool syn_ack_due = true;
    bool ack_due = false;
    bool peer_fin = false;
    bool close_after = false;  // FIN once `out` is sent
    bool fin_sent = false;
    uint64_t last_used = 0;
    std::string in;   // the guest's bytes not yet answered
    std::string out;  // our bytes not yet acknowledged
  };

  void on_tcp(const MacAddr& peer_mac, const Ipv4Packet& packet, const TcpSegment& segment,
              Mmds::Clock::time_point now);
  void open(const Key& key, const MacAddr& peer_mac, const TcpSegment& segment);
  // Reads the next request in `c.in` and queues its answer, once `c.out` is empty.
  void serve(Connection& c, Mmds::Clock::time_point now);
  void queue_control(std::vector<uint8_t> frame);
  void queue_reset(const MacAddr& peer_mac, const Ipv4Packet& packet, const TcpSegment& segment);
  std::vector<uint8_t> build_segment(const Key& key, const Connection& c, uint32_t seq,
                                     uint8_t flags, std::span<const uint8_t> payload,
                                     std::optional<uint16_t> mss = std::nullopt) const;
  // A frame `c` has to send now, if any.
  std::optional<std::vector<uint8_t>> next_of(const Key& key, Connection& c);

  std::shared_ptr<Mmds> mmds_;
  Ipv4Address address_;
  std::map<Key, Connection> connections_;
  std::deque<std::vector<uint8_t>> control_;
  std::minstd_rand isn_source_;
  uint64_t clock_ = 0;  // counts segments, for eviction
};

// A request's head and body from the start of `bytes`: its length, with the request, once
// all of it is there; 0 while more is needed; an error (the 400's text) for a malformed
// one, or one longer than `max_bytes`.
struct ParsedRequest {
  size_t length = 0;
  GuestRequest request;
  bool close = false;  // "Connection: close", or HTTP/1.0 without keep-alive
};
Result<ParsedRequest> parse_guest_request(std::string_view bytes, size_t max_bytes);

}  // namespace dsec::mmds

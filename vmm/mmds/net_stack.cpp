#include "vmm/mmds/net_stack.h"

#include <algorithm>
#include <charconv>

#include "vmm/http/request_head.h"

namespace dsec::mmds {
namespace {

using namespace tcp_flags;

// a <= b in sequence space (RFC 793 3.3).
bool seq_le(uint32_t a, uint32_t b) { return static_cast<int32_t>(b - a) >= 0; }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

Result<ParsedRequest> parse_guest_request(std::string_view bytes, size_t max_bytes) {
  const size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (bytes.size() >= max_bytes) {
      return fail("Request too large.");
    }
    return ParsedRequest{};
  }
  const size_t head_length = head_end + 4;
  http::RequestHead head(http::RequestHeadLimits{.max_bytes = max_bytes, .max_headers = 50});
  const auto complete = head.feed(bytes.substr(0, head_length));
  if (!complete || !*complete) {
    return fail("Bad request.");
  }
  if (!head.header("transfer-encoding").empty()) {
    return fail("Unsupported Transfer-Encoding.");
  }
  size_t body_length = 0;
  if (const auto text = head.header("content-length"); !text.empty()) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), body_length);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return fail("Invalid Content-Length.");
    }
  }
  if (body_length > max_bytes || head_length + body_length > max_bytes) {
    return fail("Request too large.");
  }
  if (bytes.size() < head_length + body_length) {
    return ParsedRequest{};
  }
  ParsedRequest parsed;
  parsed.length = head_length + body_length;
  parsed.request = GuestRequest{head.method(), head.url(), head.headers()};
  const std::string connection = lower(head.header("connection"));
  const std::string_view request_line = bytes.substr(0, bytes.find("\r\n"));
  const bool http10 = request_line.ends_with("HTTP/1.0");
  parsed.close = connection == "close" || (http10 && connection != "keep-alive");
  return parsed;
}

NetStack::NetStack(std::shared_ptr<Mmds> mmds, const Ipv4Address& address)
    // Initial sequence numbers need not be secret on a link that only the guest is on:
    // they differ from one VM and one start to the next, with no system call (the thread
    // that builds the device may have a seccomp filter in).
    : mmds_(std::move(mmds)),
      address_(address),
      isn_source_(static_cast<uint32_t>(
          Mmds::Clock::now().time_since_epoch().count() ^ reinterpret_cast<uintptr_t>(this))) {}

bool NetStack::detour(std::span<const uint8_t> frame, Mmds::Clock::time_point now) {
  const auto ethernet = parse_ethernet(frame);
  if (!ethernet) {
    return false;
  }
  if (ethernet->ether_type == kEtherTypeArp) {
    const auto arp = parse_arp(ethernet->payload);
    if (!arp || arp->target_ip != address_) {
      return false;
    }
    if (arp->operation == 1) {
      queue_control(build_arp_reply(kMmdsMac, address_, *arp));
    }
    return true;
  }
  if (ethernet->ether_type != kEtherTypeIpv4) {
    return false;
  }
  const auto packet = parse_ipv4(ethernet->payload);
  if (!packet || packet->destination != address_) {
    // A packet that does not parse is not ours to judge: the TAP gets it, as any other.
    return false;
  }
  if (packet->protocol == kProtocolTcp && !packet->fragment) {
    if (const auto segment = parse_tcp(*packet)) {
      on_tcp(ethernet->source, *packet, *segment, now);
    }
  }
  return true;  // for the MMDS address: never to the TAP, answered or not
}

void NetStack::queue_control(std::vector<uint8_t> frame) {
  if (control_.size() < kMaxPendingFrames) {
    control_.push_back(std::move(frame));
  }
}

void NetStack::queue_reset(const MacAddr& peer_mac, const Ipv4Packet& packet,
                           const TcpSegment& segment) {
  if ((segment.flags & kRst) != 0) {
    return;  // never a RST for a RST
  }
  TcpOut out{.source_mac = kMmdsMac,
             .destination_mac = peer_mac,
             .source_ip = address_,
             .destination_ip = packet.source,
             .source_port = segment.destination_port,
             .destination_port = segment.source_port};
  // RFC 793 3.4: a RST takes its sequence number from the segment's ACK, or else
  // acknowledges the segment.
  if ((segment.flags & kAck) != 0) {
    out.seq = segment.ack;
    out.flags = kRst;
  } else {
    const uint32_t length = static_cast<uint32_t>(segment.payload.size()) +
                            ((segment.flags & kSyn) != 0 ? 1 : 0) +
                            ((segment.flags & kFin) != 0 ? 1 : 0);
    out.ack = segment.seq + length;
    out.flags = kRst | kAck;
  }
  queue_control(build_tcp_frame(out, {}));
}

void NetStack::open(const Key& key, const MacAddr& peer_mac, const TcpSegment& segment) {
  if (connections_.size() >= kMaxConnections && !connections_.contains(key)) {
    const auto idlest = std::min_element(
        connections_.begin(), connections_.end(),
        [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    connections_.erase(idlest);
  }
  Connection c;
  c.peer_mac = peer_mac;
  c.iss = static_cast<uint32_t>(isn_source_());
  c.rcv_nxt = segment.seq + 1;
  c.snd_una = c.iss + 1;
  c.snd_nxt = c.iss + 1;
  c.peer_window = segment.window;
  c.mss = std::clamp<uint16_t>(segment.mss.value_or(536), 64, kOwnMss);
  c.last_used = clock_;
  connections_[key] = std::move(c);
}

void NetStack::on_tcp(const MacAddr& peer_mac, const Ipv4Packet& packet,
                      const TcpSegment& segment, Mmds::Clock::time_point now) {
  ++clock_;
  const Key key{packet.source, segment.source_port};
  auto it = connections_.find(key);
  if (segment.destination_port != kPort) {
    queue_reset(peer_mac, packet, segment);
    return;
  }
  if ((segment.flags & kRst) != 0) {
    if (it != connections_.end()) {
      connections_.erase(it);
    }
    return;
  }
  if ((segment.flags & kSyn) != 0) {
    if ((segment.flags & kAck) != 0) {
      queue_reset(peer_mac, packet, segment);  // we open no connection
    } else if (it != connections_.end() && !it->second.established &&
               it->second.rcv_nxt == segment.seq + 1) {
      it->second.syn_ack_due = true;  // the guest asks again
    } else {
      open(key, peer_mac, segment);
    }
    return;
  }
  if (it == connections_.end() || (segment.flags & kAck) == 0) {
    if (it == connections_.end()) {
      queue_reset(peer_mac, packet, segment);
    }
    return;
  }
  Connection& c = it->second;
  c.last_used = clock_;
  // What the guest acknowledges: our SYN, bytes of `out`, our FIN.
  if (!seq_le(c.snd_una, segment.ack) || !seq_le(segment.ack, c.snd_nxt)) {
    c.ack_due = true;  // acknowledges what we never sent
    return;
  }
  c.established = true;
  c.syn_ack_due = false;
  const bool fin_acked = c.fin_sent && segment.ack == c.snd_nxt;
  c.out.erase(0, std::min<size_t>(segment.ack - c.snd_una, c.out.size()));
  c.snd_una = segment.ack;
  c.peer_window = segment.window;
  // The guest's bytes, in order only.
  if (!segment.payload.empty()) {
    if (segment.seq == c.rcv_nxt) {
      const size_t room = kMaxRequestBytes - std::min(kMaxRequestBytes, c.in.size());
      const size_t take = std::min(room, segment.payload.size());
      c.in.append(reinterpret_cast<const char*>(segment.payload.data()), take);
      c.rcv_nxt += static_cast<uint32_t>(take);
    }
    c.ack_due = true;
  }
  const bool fin_now = (segment.flags & kFin) != 0 && !c.peer_fin &&
                      segment.seq + static_cast<uint32_t>(segment.payload.size()) == c.rcv_nxt;
  if (fin_now) {
    c.rcv_nxt += 1;
    c.peer_fin = true;
    c.close_after = true;
    c.ack_due = true;
  }
  serve(c, now);
  if (c.peer_fin && fin_acked) {
    // Both sides closed: the guest's FIN, if this segment carried it, gets its ACK now, and
    // the connection goes.
    if (fin_now) {
      queue_control(build_segment(key, c, c.snd_nxt, kAck, {}));
    }
    connections_.erase(it);
  }
}

void NetStack::serve(Connection& c, Mmds::Clock::time_point now) {
  if (!c.out.empty() || c.fin_sent || c.in.empty()) {
    return;  // one response in flight at a time
  }
  auto parsed = parse_guest_request(c.in, kMaxRequestBytes);
  GuestResponse response;
  if (!parsed) {
    response = GuestResponse{.status = 400, .body = parsed.error().message()};
    c.in.clear();
    c.close_after = true;
  } else if (parsed->length == 0) {
    if (c.peer_fin) {
      c.in.clear();  // half a request, and the guest is done sending
    }
    return;
  } else {
    response = mmds_->answer(parsed->request, now);
    c.in.erase(0, parsed->length);
    c.close_after = c.close_after || parsed->close;
  }
  c.out = response.serialize();
}

std::vector<uint8_t> NetStack::build_segment(const Key& key, const Connection& c, uint32_t seq,
                                       uint8_t flags, std::span<const uint8_t> payload,
                                       std::optional<uint16_t> mss) const {
  const size_t room = kMaxRequestBytes - std::min(kMaxRequestBytes, c.in.size());
  return build_tcp_frame(TcpOut{.source_mac = kMmdsMac,
                                .destination_mac = c.peer_mac,
                                .source_ip = address_,
                                .destination_ip = key.ip,
                                .source_port = kPort,
                                .destination_port = key.port,
                                .seq = seq,
                                .ack = c.rcv_nxt,
                                .flags = flags,
                                .window = static_cast<uint16_t>(room),
                                .mss = mss},
                         payload);
}

std::optional<std::vector<uint8_t>> NetStack::next_of(const Key& key, Connection& c) {
  if (c.syn_ack_due) {
    c.syn_ack_due = false;
    return build_segment(key, c, c.iss, kSyn | kAck, {}, kOwnMss);
  }
  if (!c.established) {
    return std::nullopt;
  }
  const uint32_t in_flight = c.snd_nxt - c.snd_una;
  const size_t unsent = c.out.size() - std::min<size_t>(in_flight, c.out.size());
  if (unsent > 0 && in_flight < c.peer_window) {
    const size_t length = std::min<size_t>({unsent, c.mss, c.peer_window - in_flight});
    const auto* data = reinterpret_cast<const uint8_t*>(c.out.data()) + in_flight;
    auto frame = build_segment(key, c, c.snd_nxt, kAck | kPsh, {data, length});
    c.snd_nxt += static_cast<uint32_t>(length);
    c.ack_due = false;
    return frame;
  }
  if (unsent == 0 && c.close_after && !c.fin_sent) {
    c.fin_sent = true;
    c.ack_due = false;
    return build_segment(key, c, c.snd_nxt++, kFin | kAck, {});
  }
  if (c.ack_due) {
    c.ack_due = false;
    return build_segment(key, c, c.snd_nxt, kAck, {});
  }
  return std::nullopt;
}

std::optional<std::vector<uint8_t>> NetStack::next_frame() {
  if (!control_.empty()) {
    auto frame = std::move(control_.front());
    control_.pop_front();
    return frame;
  }
  for (auto& [key, c] : connections_) {
    if (auto frame = next_of(key, c)) {
      return frame;
    }
  }
  return std::nullopt;
}

bool NetStack::has_frame() const {
  if (!control_.empty()) {
    return true;
  }
  return std::any_of(connections_.begin(), connections_.end(), [](const auto& entry) {
    const Connection& c = entry.second;
    const uint32_t in_flight = c.snd_nxt - c.snd_una;
    const bool unsent = c.out.size() > in_flight && in_flight < c.peer_window;
    const bool fin = c.close_after && !c.fin_sent && c.out.size() == in_flight;
    return c.syn_ack_due || (c.established && (unsent || fin || c.ack_due));
  });
}

}  // namespace dsec::mmds

#include "vmm/devices/virtio/vsock/connection.h"

#include <fmt/format.h>

namespace dsec::virtio::vsock {

void Connection::update_peer_credit(const VsockHeader& header) {
  peer_buf_alloc_ = header.buf_alloc;
  peer_fwd_cnt_ = header.fwd_cnt;
}

bool Connection::on_response() {
  if (state_ != ConnectionState::kLocalInit) {
    return false;
  }
  state_ = ConnectionState::kEstablished;
  return true;
}

bool Connection::accept_guest_data(uint32_t len) {
  // The counters wrap modulo 2^32 (5.10.6.3); their difference does not while the guest
  // keeps within kBufAlloc.
  if (state_ != ConnectionState::kEstablished || (peer_shutdown_ & kShutdownSend) != 0 ||
      uint64_t{tx_unforwarded()} + len > kBufAlloc) {
    return false;
  }
  tx_cnt_ += len;
  return true;
}

void Connection::on_forwarded_to_host(uint32_t len) {
  fwd_cnt_ += len;
}

uint32_t Connection::on_peer_shutdown(uint32_t flags) {
  peer_shutdown_ |= flags & kShutdownBoth;
  return peer_shutdown_;
}

uint32_t Connection::peer_credit() const {
  const uint32_t in_flight = rx_cnt_ - peer_fwd_cnt_;
  if (in_flight > peer_buf_alloc_) {
    return 0;  // shrunken buffer, or a fwd_cnt past what we sent: wait for a sane update
  }
  return peer_buf_alloc_ - in_flight;
}

bool Connection::can_send_to_guest() const {
  return state_ == ConnectionState::kEstablished && (peer_shutdown_ & kShutdownRcv) == 0;
}

void Connection::queue_control(uint16_t op, uint32_t flags) {
  // One CREDIT_UPDATE pending is enough: it carries the counters when it is sent.
  if (op == kOpCreditUpdate) {
    for (const Control& c : control_) {
      if (c.op == kOpCreditUpdate) {
        return;
      }
    }
  }
  control_.push_back({op, flags});
}

std::optional<VsockHeader> Connection::take_control() {
  if (control_.empty()) {
    return std::nullopt;
  }
  const Control c = control_.front();
  control_.pop_front();
  return make_header(c.op, 0, c.flags);
}

VsockHeader Connection::make_header(uint16_t op, uint32_t len, uint32_t flags) {
  last_fwd_cnt_sent_ = fwd_cnt_;
  return {.src_cid = kHostCid,
          .dst_cid = guest_cid_,
          .src_port = local_port_,
          .dst_port = peer_port_,
          .len = len,
          .type = kTypeStream,
          .op = op,
          .flags = flags,
          .buf_alloc = kBufAlloc,
          .fwd_cnt = fwd_cnt_};
}

bool Connection::needs_credit_update() const {
  return fwd_cnt_ - last_fwd_cnt_sent_ >= kCreditUpdateThreshold;
}

std::string Connection::describe() const {
  static constexpr const char* kStates[] = {"connecting", "established", "closing", "closed"};
  return fmt::format(
      "host port {} <-> guest port {}, {}: from the guest {} bytes, {} taken by the host "
      "(the guest last heard {}); to the guest {} bytes, credit {} of its {}{}{}",
      local_port_, peer_port_, kStates[static_cast<int>(state_)], tx_cnt_, fwd_cnt_,
      last_fwd_cnt_sent_, rx_cnt_, peer_credit(), peer_buf_alloc_,
      peer_shutdown_ != 0 ? fmt::format(", guest shut down {:#x}", peer_shutdown_) : "",
      control_.empty() ? "" : fmt::format(", {} control packets owed", control_.size()));
}

void Connection::start_closing() {
  if (state_ == ConnectionState::kClosing || state_ == ConnectionState::kClosed) {
    return;
  }
  state_ = ConnectionState::kClosing;
  queue_control(kOpShutdown, kShutdownBoth);
}

void Connection::reset() {
  if (state_ == ConnectionState::kClosed) {
    return;
  }
  state_ = ConnectionState::kClosed;
  control_.clear();
  control_.push_back({kOpRst, 0});
}

}  // namespace dsec::virtio::vsock

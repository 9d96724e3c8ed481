// One vsock stream between the guest and a host Unix socket: its state, its flow control
// (virtio 1.2, 5.10.6.3) and the control packets it owes the guest. No I/O here: the muxer
// moves the bytes and asks the connection what it may do.
//
// Directions, as in Firecracker: "tx" is guest to host, "rx" host to guest.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>

#include "vmm/devices/virtio/vsock/packet.h"

namespace dsec::virtio::vsock {

enum class ConnectionState {
  kLocalInit,    // the host asked (CONNECT); our REQUEST is owed or sent, no RESPONSE yet
  kEstablished,  // data may flow
  kClosing,      // we sent (or owe) SHUTDOWN; waiting for the guest's RST, or the kill timer
  kClosed,       // done: the muxer drops it once it owes the guest nothing more
};

class Connection {
 public:
  // Bytes of guest data we accept before the host has taken them: the buf_alloc we show
  // the guest, and the bound on what one connection buffers in the VMM.
  static constexpr uint32_t kBufAlloc = 256 * 1024;
  // Send CREDIT_UPDATE once the host has taken this much since the guest last heard our
  // fwd_cnt, so that a guest sending steadily never waits for a CREDIT_REQUEST.
  static constexpr uint32_t kCreditUpdateThreshold = kBufAlloc / 4;

  Connection(uint64_t guest_cid, uint32_t local_port, uint32_t peer_port, ConnectionState state)
      : guest_cid_(guest_cid), local_port_(local_port), peer_port_(peer_port), state_(state) {}

  uint32_t local_port() const { return local_port_; }
  uint32_t peer_port() const { return peer_port_; }
  ConnectionState state() const { return state_; }

  // --- The guest's packets (after the muxer matched the ports) ---
  // Every guest packet carries the guest's buf_alloc and fwd_cnt.
  void update_peer_credit(const VsockHeader& header);
  // RESPONSE to our REQUEST: established. False if it was not expected (the muxer resets).
  bool on_response();
  // RW payload of `len` bytes: false if it exceeds the credit we gave (the guest broke flow
  // control: the muxer resets the stream), else the bytes count as received.
  bool accept_guest_data(uint32_t len);
  // Bytes of guest data the host took (written to its socket).
  void on_forwarded_to_host(uint32_t len);
  // SHUTDOWN from the guest; the flags accumulate. Returns the flags seen so far.
  uint32_t on_peer_shutdown(uint32_t flags);
  uint32_t peer_shutdown() const { return peer_shutdown_; }

  // --- Host to guest ---
  // How many bytes the guest can take now: its buf_alloc less what we sent that it has not
  // consumed. 0 if the guest's counters make no sense (fwd_cnt ahead of what we sent).
  uint32_t peer_credit() const;
  // Whether reading the host socket is allowed at all (established, guest still receiving).
  bool can_send_to_guest() const;
  void on_sent_to_guest(uint32_t len) { rx_cnt_ += len; }

  // --- Control packets owed to the guest, oldest first ---
  void queue_control(uint16_t op, uint32_t flags = 0);
  bool has_control() const { return !control_.empty(); }
  // The next owed control packet, stamped with our credit.
  std::optional<VsockHeader> take_control();
  // A header from us to the guest for `op`, with our current credit (which it then knows).
  VsockHeader make_header(uint16_t op, uint32_t len = 0, uint32_t flags = 0);
  // Whether fwd_cnt moved far enough since the guest last saw it to owe a CREDIT_UPDATE.
  bool needs_credit_update() const;

  // The host closed its end: owe SHUTDOWN (both directions) and wait for the guest's RST.
  void start_closing();
  // Owe RST and end: no more data either way.
  void reset();
  void close() { state_ = ConnectionState::kClosed; }

  uint32_t fwd_cnt() const { return fwd_cnt_; }
  // The stream's state and both directions' counters and credit, in words (one line).
  std::string describe() const;
  uint32_t rx_cnt() const { return rx_cnt_; }
  // Guest bytes received and not yet taken by the host.
  uint32_t tx_unforwarded() const { return tx_cnt_ - fwd_cnt_; }

 private:
  struct Control {
    uint16_t op;
    uint32_t flags;
  };

  uint64_t guest_cid_;
  uint32_t local_port_;
  uint32_t peer_port_;
  ConnectionState state_;

  // Ours: guest bytes received (tx_cnt) and taken by the host (fwd_cnt); fwd_cnt as the
  // guest last saw it.
  uint32_t tx_cnt_ = 0;
  uint32_t fwd_cnt_ = 0;
  uint32_t last_fwd_cnt_sent_ = 0;
  // Theirs: bytes we sent the guest (rx_cnt), and its last buf_alloc and fwd_cnt.
  uint32_t rx_cnt_ = 0;
  uint32_t peer_buf_alloc_ = 0;
  uint32_t peer_fwd_cnt_ = 0;
  uint32_t peer_shutdown_ = 0;

  std::deque<Control> control_;
};

}  // namespace dsec::virtio::vsock

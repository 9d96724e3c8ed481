#include "vmm/devices/virtio/vsock/muxer.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "vmm/devices/virtio/chain_buffers.h"
#include "vmm/devices/virtio/vsock/unix_socket.h"

namespace dsec::virtio::vsock {

Muxer::Muxer(io::EventLoop& loop, uint64_t guest_cid, std::mutex& mutex,
             std::function<void()> rx_ready)
    : loop_(loop), guest_cid_(guest_cid), mutex_(mutex), rx_ready_(std::move(rx_ready)) {}

template <typename F>
void Muxer::locked(F&& f) {
  const std::lock_guard lock(mutex_);
  f();
  if (has_rx()) {
    rx_ready_();
  }
}

Result<std::unique_ptr<Muxer>> Muxer::create(io::EventLoop& loop, std::string uds_path,
                                             uint64_t guest_cid, std::mutex& mutex,
                                             std::function<void()> rx_ready) {
  std::unique_ptr<Muxer> muxer(new Muxer(loop, guest_cid, mutex, std::move(rx_ready)));
  Muxer* m = muxer.get();
  muxer->host_listener_ = DSEC_TRY(HostListener::create(
      loop, std::move(uds_path), [m](const std::function<void()>& work) { m->locked(work); },
      [m](UniqueFd socket, uint32_t port) { m->on_host_connect(std::move(socket), port); }));
  return muxer;
}

Muxer::~Muxer() {
  if (host_listener_ == nullptr) {
    return;  // create() failed: nothing was started
  }
  deactivate();
  purge();
}

void Muxer::activate() {
  host_listener_->set_open(true);
}

void Muxer::deactivate() {
  host_listener_->set_open(false);
  host_listener_->close_pending();
  for (auto& [id, entry] : entries_) {
    graveyard_.push_back(std::move(entry));
  }
  entries_.clear();
  by_ports_.clear();
  rx_fifo_.clear();
  pending_resets_.clear();
}

void Muxer::purge() {
  for (auto& entry : graveyard_) {
    drop_host(*entry);
  }
  graveyard_.clear();
  host_listener_->purge();
}

// --- Host sockets ---

void Muxer::on_host_connect(UniqueFd socket, uint32_t port) {
  if (entries_.size() >= kMaxConnections) {
    return;  // the socket closes: the host sees EOF before any "OK"
  }
  Entry& e =
      add_entry(Connection(guest_cid_, allocate_local_port(), port, ConnectionState::kLocalInit),
                std::move(socket));
  e.conn.queue_control(kOpRequest);
  arm_kill_timer(e, kConnectTimeout);
  enqueue(e);
}

void Muxer::on_socket_ready(uint64_t id) {
  Entry* e = find(id);
  if (e == nullptr || !e->fd) {
    return;
  }
  if ((e->watch_events & POLLOUT) != 0) {
    flush_tx(*e);
  }
  if ((e->watch_events & POLLIN) != 0 && e->fd) {
    // Read when the guest has an rx buffer for it (fill_rx), not now.
    e->host_readable = true;
    enqueue(*e);
  }
  update_watch(*e);
  finish_if_done(*e);
}

void Muxer::on_kill_timer(uint64_t id) {
  Entry* e = find(id);
  if (e == nullptr) {
    return;
  }
  e->kill_timer.reset();  // it fired: nothing to cancel
  if (e->conn.state() == ConnectionState::kLocalInit) {
    if (log_limiter_.allow()) {
      spdlog::info(
          "vsock: the guest did not answer a host connection to its port {} within {} ms; "
          "closing it",
          e->conn.peer_port(), kConnectTimeout.count());
    }
    kill(*e);
  } else if (e->conn.state() == ConnectionState::kClosing) {
    kill(*e);
  }
}

// --- Guest packets ---

void Muxer::on_guest_packet(GuestMemory& memory, const TxPacket& packet) {
  const VsockHeader& h = packet.header;
  if (h.type != kTypeStream) {
    queue_reset_reply(h);  // no SEQPACKET or DGRAM here (5.10.6.1)
    return;
  }
  Entry* found = find(Ports{h.dst_port, h.src_port});
  if (found == nullptr) {
    if (h.op == kOpRequest) {
      connect_to_host(h);
    } else {
      queue_reset_reply(h);
    }
    return;
  }
  Entry& e = *found;
  e.conn.update_peer_credit(h);
  switch (h.op) {
    case kOpResponse:
      if (!e.conn.on_response()) {
        kill(e);
        break;
      }
      if (e.kill_timer) {
        static_cast<void>(loop_.cancel_timer(*e.kill_timer));
        e.kill_timer.reset();
      }
      {
        const std::string ok = "OK " + std::to_string(e.conn.local_port()) + "\n";
        if (!reserve_tx(e, ok.size())) {
          spdlog::warn("vsock: no room for the OK line of a host connection to guest port {}",
                       h.src_port);
          kill(e);
          break;
        }
        e.tx_buf.insert(e.tx_buf.begin(), ok.begin(), ok.end());
        e.tx_uncounted += ok.size();
        flush_tx(e);
      }
      break;
    case kOpRw:
      if (!e.conn.accept_guest_data(h.len)) {
        if (log_limiter_.allow()) {
          spdlog::warn(
              "vsock: guest port {} sent {} bytes beyond its credit or its shutdown; "
              "resetting the stream",
              h.src_port, h.len);
        }
        kill(e);
        break;
      }
      forward_to_host(e, memory, packet);
      break;
    case kOpShutdown:
      if (e.conn.on_peer_shutdown(h.flags) == kShutdownBoth) {
        // The guest closed: it waits for our RST (Linux, virtio_transport_close). What it
        // sent before must reach the host first, so with data still buffered the stream
        // ends when the socket has taken it (flush_tx). A guest that stops waiting sends
        // RST, which ends it at once.
        flush_tx(e);
        if (e.tx_buf.empty() || !e.fd) {
          kill(e);
        } else {
          e.close_when_drained = true;
        }
      } else if ((h.flags & kShutdownSend) != 0) {
        e.shut_wr_pending = true;
        flush_tx(e);
      }
      break;
    case kOpRst:
      if (e.conn.state() == ConnectionState::kLocalInit && log_limiter_.allow()) {
        spdlog::info("vsock: the guest refused a host connection to its port {} (RST)", h.src_port);
      }
      drop_host(e);
      e.conn.close();
      break;
    case kOpCreditUpdate:
      break;  // update_peer_credit() did it
    case kOpCreditRequest:
      e.conn.queue_control(kOpCreditUpdate);
      break;
    default:  // REQUEST on a live stream, or an unknown op
      kill(e);
      break;
  }
  if (wants_rx(e)) {
    enqueue(e);  // a control packet, or host data the guest's new credit lets through
  }
  update_watch(e);
  finish_if_done(e);
}

void Muxer::connect_to_host(const VsockHeader& request) {
  if (entries_.size() >= kMaxConnections) {
    queue_reset_reply(request);
    return;
  }
  auto fd = connect_unix(guest_connect_path(host_listener_->path(), request.dst_port));
  if (!fd) {
    queue_reset_reply(request);  // nothing listens there: the guest's connect() fails
    return;
  }
  // A reset still owed for an earlier packet on these ports would reach the guest before
  // our RESPONSE, and the guest would take it as the refusal of this new stream.
  std::erase_if(pending_resets_, [&request](const VsockHeader& reset) {
    return reset.type == kTypeStream && reset.src_port == request.dst_port &&
           reset.dst_port == request.src_port;
  });
  Entry& e = add_entry(
      Connection(guest_cid_, request.dst_port, request.src_port, ConnectionState::kEstablished),
      std::move(*fd));
  e.conn.update_peer_credit(request);
  e.conn.queue_control(kOpResponse);
  enqueue(e);
  update_watch(e);
}

void Muxer::queue_reset_reply(const VsockHeader& to) {
  if (to.op == kOpRst || pending_resets_.size() >= kMaxPendingResets) {
    return;  // never answer a reset with a reset
  }
  pending_resets_.push_back({.src_cid = kHostCid,
                             .dst_cid = guest_cid_,
                             .src_port = to.dst_port,
                             .dst_port = to.src_port,
                             .len = 0,
                             // The packet's own type: a reset for a stray SEQPACKET or
                             // DGRAM packet must not end the stream on the same ports.
                             .type = to.type,
                             .op = kOpRst,
                             .flags = 0,
                             .buf_alloc = 0,
                             .fwd_cnt = 0});
}

void Muxer::forward_to_host(Entry& e, GuestMemory& memory, const TxPacket& packet) {
  size_t sent = 0;
  if (e.tx_buf.empty() && e.fd) {
    auto iovecs = host_iovecs(memory, packet.payload);
    if (!iovecs) {
      kill(e);  // parse_tx_packet() checked the chain; cannot happen
      return;
    }
    msghdr message{};
    message.msg_iov = iovecs->data();
    message.msg_iovlen = iovecs->size();
    const ssize_t n = ::sendmsg(e.fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      kill(e);  // the host closed its socket
      return;
    }
    sent = n > 0 ? static_cast<size_t>(n) : 0;
    e.conn.on_forwarded_to_host(static_cast<uint32_t>(sent));
  }
  // The rest waits in the stream's buffer: accept_guest_data() bounds it to kBufAlloc, and
  // all streams together hold at most kMaxBufferedForHosts. The payload holds header.len
  // bytes (parse_tx_packet()).
  const size_t rest = packet.header.len - sent;
  if (rest > 0) {
    if (!reserve_tx(e, rest)) {
      if (log_limiter_.allow()) {
        spdlog::warn(
            "vsock: guest port {} sent {} bytes that its host socket did not take, and the VM's "
            "streams already hold {} bytes for their host sockets (the most is {}); resetting "
            "the stream",
            packet.header.src_port, rest, buffered_for_hosts_, kMaxBufferedForHosts);
      }
      kill(e);
      return;
    }
    const size_t buffered = e.tx_buf.size();
    e.tx_buf.resize(buffered + rest);
    if (!read_buffers(memory, slice_buffers(packet.payload, sent),
                      std::span(e.tx_buf).subspan(buffered))) {
      e.tx_buf.resize(buffered);
      kill(e);  // as above: cannot happen
      return;
    }
  }
  if (e.conn.needs_credit_update()) {
    e.conn.queue_control(kOpCreditUpdate);
  }
}

void Muxer::flush_tx(Entry& e) {
  if (!e.fd) {
    return;
  }
  size_t sent = 0;
  while (sent < e.tx_buf.size()) {
    const ssize_t n = ::send(e.fd.get(), e.tx_buf.data() + sent, e.tx_buf.size() - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      }
      kill(e);
      return;
    }
    sent += static_cast<size_t>(n);
  }
  take_tx(e, sent);
  const size_t uncounted = std::min(sent, e.tx_uncounted);
  e.tx_uncounted -= uncounted;
  e.conn.on_forwarded_to_host(static_cast<uint32_t>(sent - uncounted));
  if (e.conn.needs_credit_update()) {
    e.conn.queue_control(kOpCreditUpdate);
    enqueue(e);
  }
  if (e.tx_buf.empty() && e.shut_wr_pending) {
    e.shut_wr_pending = false;
    ::shutdown(e.fd.get(), SHUT_WR);
  }
  if (e.tx_buf.empty() && e.close_when_drained) {
    e.close_when_drained = false;
    kill(e);
  }
}

bool Muxer::reserve_tx(Entry& e, size_t more) {
  // The most one stream buffers: its credit's worth of data, and our "OK <port>\n" line.
  constexpr size_t kMostPerStream = Connection::kBufAlloc + 16;
  const size_t needed = e.tx_buf.size() + more;
  const size_t capacity = e.tx_buf.capacity();
  if (needed <= capacity) {
    return true;
  }
  // Doubling (fewer copies for a host that reads slowly), never past one stream's most.
  const size_t grown = std::max(needed, std::min(2 * capacity, kMostPerStream));
  if (buffered_for_hosts_ - capacity + grown > kMaxBufferedForHosts) {
    return false;
  }
  e.tx_buf.reserve(grown);
  buffered_for_hosts_ += e.tx_buf.capacity() - capacity;
  return true;
}

void Muxer::take_tx(Entry& e, size_t n) {
  e.tx_buf.erase(e.tx_buf.begin(), e.tx_buf.begin() + static_cast<ptrdiff_t>(n));
  if (e.tx_buf.empty()) {
    buffered_for_hosts_ -= e.tx_buf.capacity();
    std::vector<uint8_t>().swap(e.tx_buf);
  }
}

// --- Entries ---

Muxer::Entry* Muxer::find(uint64_t id) {
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.get();
}

Muxer::Entry* Muxer::find(Ports ports) {
  const auto it = by_ports_.find(ports);
  return it == by_ports_.end() ? nullptr : find(it->second);
}

Muxer::Entry& Muxer::add_entry(const Connection& conn, UniqueFd fd) {
  const uint64_t id = next_id_++;
  const Ports ports{conn.local_port(), conn.peer_port()};
  auto entry = std::make_unique<Entry>(id, conn, std::move(fd));
  Entry& e = *entry;
  entries_.emplace(id, std::move(entry));
  by_ports_.emplace(ports, id);
  return e;
}

uint32_t Muxer::allocate_local_port() {
  for (;;) {
    const uint32_t port = next_local_port_;
    next_local_port_ = next_local_port_ == UINT32_MAX ? kFirstLocalPort : next_local_port_ + 1;
    // Unused by any stream (the map is ordered by local port first).
    const auto it = by_ports_.lower_bound(Ports{port, 0});
    if (it == by_ports_.end() || it->first.first != port) {
      return port;
    }
  }
}

void Muxer::kill(Entry& e) {
  e.conn.reset();
  drop_host(e);
  enqueue(e);
}

void Muxer::drop_host(Entry& e) {
  if (e.watch) {
    static_cast<void>(loop_.remove_watch(*e.watch));
    e.watch.reset();
    e.watch_events = 0;
  }
  if (e.kill_timer) {
    static_cast<void>(loop_.cancel_timer(*e.kill_timer));
    e.kill_timer.reset();
  }
  e.fd.reset();
  take_tx(e, e.tx_buf.size());
  e.host_readable = false;
}

void Muxer::arm_kill_timer(Entry& e, std::chrono::milliseconds after) {
  if (e.kill_timer) {
    return;
  }
  auto timer =
      loop_.add_timer(after, [this, id = e.id] { locked([this, id] { on_kill_timer(id); }); });
  if (timer) {
    e.kill_timer = *timer;
  }
}

void Muxer::update_watch(Entry& e) {
  uint32_t wanted = 0;
  if (e.fd) {
    if (!e.host_readable && e.conn.can_send_to_guest() && e.conn.peer_credit() > 0) {
      wanted |= POLLIN;
    }
    if (!e.tx_buf.empty()) {
      wanted |= POLLOUT;
    }
  }
  if (wanted == e.watch_events && (wanted == 0) == !e.watch) {
    return;
  }
  if (e.watch) {
    static_cast<void>(loop_.remove_watch(*e.watch));
    e.watch.reset();
  }
  e.watch_events = wanted;
  if (wanted != 0) {
    auto watch = loop_.add_fd_watch(
        e.fd.get(), [this, id = e.id] { locked([this, id] { on_socket_ready(id); }); }, wanted);
    if (!watch) {
      e.watch_events = 0;
      kill(e);
      return;
    }
    e.watch = *watch;
  }
}

bool Muxer::wants_rx(const Entry& e) {
  return e.conn.has_control() ||
         (e.fd && e.host_readable && e.conn.can_send_to_guest() && e.conn.peer_credit() > 0);
}

void Muxer::enqueue(Entry& e) {
  if (!e.in_rx_fifo) {
    e.in_rx_fifo = true;
    rx_fifo_.push_back(e.id);
  }
}

void Muxer::finish_if_done(Entry& e) {
  if (e.conn.state() != ConnectionState::kClosed || e.conn.has_control() || e.in_rx_fifo) {
    return;
  }
  drop_host(e);
  by_ports_.erase(Ports{e.conn.local_port(), e.conn.peer_port()});
  entries_.erase(e.id);  // e is gone
}

std::string Muxer::describe() const {
  std::string text = fmt::format(
      "vsock: {} streams, {} host sockets before CONNECT, {} streams and {} resets owed to the "
      "guest, {} bytes held for host sockets",
      entries_.size(), host_listener_->pending_count(), rx_fifo_.size(), pending_resets_.size(),
      buffered_for_hosts_);
  for (const auto& [id, e] : entries_) {
    text += fmt::format("\nstream {}: {}; {} bytes buffered for the host socket{}{}{}", id,
                        e->conn.describe(), e->tx_buf.size(), !e->fd ? ", socket closed" : "",
                        e->host_readable ? ", host data unread" : "",
                        e->watch_events == 0         ? ""
                        : e->watch_events == POLLIN  ? ", polling it for input"
                        : e->watch_events == POLLOUT ? ", polling it for room"
                                                     : ", polling it for input and room");
  }
  return text;
}

// --- Packets for the guest ---

Result<uint32_t> Muxer::fill_rx(GuestMemory& memory, const DescriptorChain& chain) {
  const uint32_t capacity = DSEC_TRY(rx_payload_capacity(chain));
  if (!pending_resets_.empty()) {
    const VsockHeader reset = pending_resets_.front();
    pending_resets_.pop_front();
    return write_rx_packet(memory, chain, reset, {});
  }
  // Each stream is served at most once per buffer: one that still wants the guest but
  // could put nothing in this buffer (its payload room is 0 bytes) waits for the next.
  std::vector<uint64_t> again;
  Result<uint32_t> written = 0;
  while (!rx_fifo_.empty()) {
    const uint64_t id = rx_fifo_.front();
    rx_fifo_.pop_front();
    Entry* e = find(id);
    if (e == nullptr) {
      continue;
    }
    written = serve(*e, memory, chain, capacity);
    if (wants_rx(*e)) {
      again.push_back(id);  // still in the fifo
    } else {
      e->in_rx_fifo = false;
      update_watch(*e);
      finish_if_done(*e);
    }
    if (!written || *written != 0) {
      break;
    }
  }
  rx_fifo_.insert(rx_fifo_.end(), again.begin(), again.end());
  return written;
}

Result<uint32_t> Muxer::serve(Entry& e, GuestMemory& memory, const DescriptorChain& chain,
                              uint32_t capacity) {
  for (;;) {
    if (auto control = e.conn.take_control()) {
      return write_rx_header(memory, chain, *control);
    }
    if (!e.host_readable || !e.conn.can_send_to_guest() || !e.fd) {
      return 0;
    }
    const uint32_t want = std::min(capacity, e.conn.peer_credit());
    if (want == 0) {
      return 0;  // update_watch() stops polling until the guest's credit returns
    }
    const std::vector<iovec> iovecs = DSEC_TRY(rx_payload_iovecs(memory, chain, want));
    const ssize_t n = ::readv(e.fd.get(), iovecs.data(), static_cast<int>(iovecs.size()));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        e.host_readable = false;
        return 0;
      }
      kill(e);  // then send the RST
      continue;
    }
    if (n == 0) {
      // The host closed its end: SHUTDOWN, and the guest answers RST (or the timer does).
      e.host_readable = false;
      e.conn.start_closing();
      drop_host(e);
      arm_kill_timer(e, kKillTimeout);
      continue;
    }
    const auto len = static_cast<uint32_t>(n);
    // A short read drained the socket; a full one may have left more.
    e.host_readable = len == want;
    e.conn.on_sent_to_guest(len);
    return write_rx_header(memory, chain, e.conn.make_header(kOpRw, len));
  }
}

}  // namespace dsec::virtio::vsock

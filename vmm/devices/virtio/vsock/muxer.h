// The host side of every vsock stream of one device: Firecracker's hybrid vsock over Unix
// sockets (unix_socket.h). It takes the host connections its HostListener hands on,
// connects the guest's requests to "<uds_path>_<port>", moves bytes between the sockets
// and the guest's packets within each stream's credit, and queues the packets the guest
// is owed.
//
// Threading: every member runs on the event loop's thread with the device's lock held; the
// socket and timer handlers it registers take that lock themselves, then call rx_ready so
// that the device delivers what they queued. The loop must outlive the muxer, and the
// muxer must be destroyed on the loop's thread or while the loop is not running.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/log_rate_limiter.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/virtio/vsock/connection.h"
#include "vmm/devices/virtio/vsock/host_listener.h"
#include "vmm/devices/virtio/vsock/packet.h"
#include "vmm/io/event_loop.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::virtio::vsock {

class Muxer {
 public:
  // Streams at once, host- and guest-initiated together; more are refused (RST, or the
  // host socket closed).
  static constexpr size_t kMaxConnections = 1024;
  // RSTs owed for packets that match no stream; beyond this they are dropped.
  static constexpr size_t kMaxPendingResets = 256;
  // Memory the VMM holds for host sockets that have not taken the guest's data yet, all
  // streams together: their buffers' allocated size (each holds at most
  // Connection::kBufAlloc of data, plus our "OK" line). A packet whose buffering would take
  // the total past this resets its stream instead: a guest whose host peers stop reading
  // makes the VMM hold this much, not kMaxConnections times kBufAlloc.
  static constexpr size_t kMaxBufferedForHosts = size_t{8} << 20;
  // How long the guest has to answer our SHUTDOWN with RST (Firecracker's figure) before
  // the stream is reset.
  static constexpr std::chrono::milliseconds kKillTimeout{2000};
  // How long the guest has to accept or refuse a host connection (our REQUEST) before the
  // host socket is closed. Longer than Firecracker's 2 s: a guest whose vCPUs get little
  // of a loaded host's CPU can take longer, and the host's client bounds its own wait.
  static constexpr std::chrono::milliseconds kConnectTimeout{10000};
  // First port of host-initiated streams, as Firecracker: far above the ports guest
  // services listen on.
  static constexpr uint32_t kFirstLocalPort = uint32_t{1} << 30;

  // Listens on `uds_path`. `mutex` is the device's lock; `rx_ready` is called with it held,
  // on the loop thread, after a handler queued packets for the guest.
  static Result<std::unique_ptr<Muxer>> create(io::EventLoop& loop, std::string uds_path,
                                               uint64_t guest_cid, std::mutex& mutex,
                                               std::function<void()> rx_ready);
  ~Muxer();
  Muxer(const Muxer&) = delete;
  Muxer& operator=(const Muxer&) = delete;

  // Active: the guest driver is up. While inactive, host connections are accepted and
  // closed at once.
  void activate();
  // The device was reset: every stream ends without a word to the guest. May run off the
  // loop thread (with the lock held): the sockets are only closed by purge().
  void deactivate();
  // Closes what deactivate() ended; on the loop thread.
  void purge();
  // HostListener::admit_only_own: other processes' host connections wait (a restored
  // clone's, until its agent took fresh entropy and the host's clock).
  void admit_only_own_connections(bool only) { host_listener_->admit_only_own(only); }

  // A packet from the guest (parse_tx_packet() accepted it).
  void on_guest_packet(GuestMemory& memory, const TxPacket& packet);
  // Whether some packet is owed to the guest.
  bool has_rx() const { return !pending_resets_.empty() || !rx_fifo_.empty(); }
  // Writes the next owed packet into the rx chain; returns the used length, or 0 if nothing
  // was owed after all (keep the chain for later). An Error: the chain is malformed.
  Result<uint32_t> fill_rx(GuestMemory& memory, const DescriptorChain& chain);

  size_t connection_count() const { return entries_.size(); }
  // Memory held for host sockets now, all streams together (at most kMaxBufferedForHosts).
  size_t buffered_for_hosts() const { return buffered_for_hosts_; }
  // The next port a host-initiated stream gets; a snapshot keeps it.
  uint32_t next_local_port() const { return next_local_port_; }
  void set_next_local_port(uint32_t port) { next_local_port_ = port; }
  // Each stream (Connection::describe, with what waits in the VMM for the host socket and
  // whether that socket is polled) and the packets owed to the guest, one per line.
  std::string describe() const;
  const std::string& uds_path() const { return host_listener_->path(); }

 private:
  struct Entry {
    Entry(uint64_t entry_id, Connection connection, UniqueFd socket)
        : id(entry_id), conn(std::move(connection)), fd(std::move(socket)) {}

    uint64_t id;
    Connection conn;
    UniqueFd fd;
    std::optional<io::WatchId> watch;
    uint32_t watch_events = 0;
    std::optional<io::TimerId> kill_timer;
    bool host_readable = false;  // the socket has data (or EOF) we have not read yet
    bool in_rx_fifo = false;
    // Bytes for the host socket that it has not taken yet: our "OK" line first
    // (tx_uncounted bytes of it), then guest data, at most Connection::kBufAlloc.
    std::vector<uint8_t> tx_buf;
    size_t tx_uncounted = 0;
    bool shut_wr_pending = false;  // the guest sends no more: shut the socket once drained
    // The guest closed the stream with data still in tx_buf: end the stream (RST to the
    // guest, close the socket) once the host has taken it all.
    bool close_when_drained = false;
  };
  using Ports = std::pair<uint32_t, uint32_t>;  // (local port, peer port)

  Muxer(io::EventLoop& loop, uint64_t guest_cid, std::mutex& mutex, std::function<void()> rx_ready);

  // Handlers: take the lock, act, and pass the guest its packets.
  template <typename F>
  void locked(F&& f);
  void on_host_connect(UniqueFd socket, uint32_t port);
  void on_socket_ready(uint64_t id);
  void on_kill_timer(uint64_t id);

  Entry* find(uint64_t id);
  Entry* find(Ports ports);
  Entry& add_entry(const Connection& conn, UniqueFd fd);
  void connect_to_host(const VsockHeader& request);
  void queue_reset_reply(const VsockHeader& to);
  uint32_t allocate_local_port();

  void forward_to_host(Entry& e, GuestMemory& memory, const TxPacket& packet);
  // Makes room for `more` bytes at the end of e.tx_buf, within kMaxBufferedForHosts; false
  // if the VM's streams hold too much already. Every growth of a tx_buf goes through here,
  // and every shrink through take_tx(), so that buffered_for_hosts_ stays their sum.
  bool reserve_tx(Entry& e, size_t more);
  // Removes the `n` oldest bytes of e.tx_buf; an empty buffer gives its memory back.
  void take_tx(Entry& e, size_t n);
  void flush_tx(Entry& e);
  void kill(Entry& e);  // owe RST, close the host socket
  void drop_host(Entry& e);
  void arm_kill_timer(Entry& e, std::chrono::milliseconds after);
  void update_watch(Entry& e);
  // Whether e owes the guest a packet it can send now.
  static bool wants_rx(const Entry& e);
  void enqueue(Entry& e);
  // Removes the stream if it is over and owes the guest nothing.
  void finish_if_done(Entry& e);
  // Writes e's next packet into the chain; 0 if it has none.
  Result<uint32_t> serve(Entry& e, GuestMemory& memory, const DescriptorChain& chain,
                         uint32_t capacity);

  io::EventLoop& loop_;
  uint64_t guest_cid_;
  std::mutex& mutex_;
  std::function<void()> rx_ready_;

  uint64_t next_id_ = 1;
  uint32_t next_local_port_ = kFirstLocalPort;
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_;
  std::map<Ports, uint64_t> by_ports_;
  std::deque<uint64_t> rx_fifo_;
  std::deque<VsockHeader> pending_resets_;
  size_t buffered_for_hosts_ = 0;  // the sum of every entry's tx_buf.capacity()
  // Streams a reset ended, whose watches purge() removes on the loop.
  std::vector<std::unique_ptr<Entry>> graveyard_;
  LogRateLimiter log_limiter_;
  // Declared last, destroyed first: its handlers call into the streams above.
  std::unique_ptr<HostListener> host_listener_;
};

}  // namespace dsec::virtio::vsock

// The HTTP server of the VMM's API and of the pool daemon, on a Unix socket (and a TCP port
// if asked): one thread of its own ("dsec-api") runs an io_uring event loop that accepts
// clients and serves every connection (connection.h), one request at a time per
// connection, in the order they came. No thread per connection.
//
// The handler runs on that thread. It may block (a snapshot writes the VM's memory): the
// API then answers nothing else meanwhile, as Firecracker's API thread does. It is never
// the VM's own event-loop thread, so a handler may wait for work on that loop
// (Machine::snapshot does) without a deadlock. A deferred handler (serve_deferred) answers
// through a Responder instead, later if it likes, from the loop's thread: the other
// connections are served meanwhile, and its own waits for the answer. An answer may be a
// stream (HttpResponse::stream, body_stream.h): its head goes at once, its body in chunks
// as its producer writes them, no faster than the client reads; a client that goes away
// ends it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/http/body_stream.h"
#include "vmm/http/connection.h"
#include "vmm/http/transport.h"
#include "vmm/io/event_loop.h"

namespace dsec::http {

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  using DeferredHandler = std::function<void(const HttpRequest&, Responder)>;
  // At most this many clients at once (unless set_max_connections); one more is closed as
  // soon as it is accepted.
  static constexpr size_t kMaxConnections = 16;

  // Creates the socket at `path` (owner-only permissions); clients that connect wait
  // until serve(). A socket file left by a VMM that is gone is replaced; one a live
  // process answers on, or any other file, is refused.
  static Result<std::unique_ptr<HttpServer>> bind(const std::string& path, HttpLimits limits = {});
  // bind(), then serve().
  static Result<std::unique_ptr<HttpServer>> start(const std::string& path, Handler handler,
                                                   HttpLimits limits = {});
  // Starts the API thread, "dsec-api", which calls `setup` first (its seccomp filter goes
  // in there; if that fails, it logs why and serves nothing) and then waits until serve()
  // or stop(). A command launches it before its VM runs, so that no thread starts once
  // the main thread's filter is in. Once only.
  using ThreadStart = std::function<Status()>;
  // Also serves on `address`:`port` (a numeric IPv4 or IPv6 address; port 0: a free port
  // the kernel picks), from serve() on; returns the port. Unlike the socket file no
  // permission guards it: whoever can reach the address can connect, so the handler must
  // know its callers (HttpRequest::caller says who connected from where). With `tls`, every
  // connection there speaks TLS (vmm/tls): its handshake counts against the header
  // timeout, and one that fails closes the connection (logged, a line every few seconds at
  // most). Before serve(). A server may listen on several ports, each under a name of its
  // own that its callers' Caller::listener carries, so that one handler can serve another
  // API on another port (the pool's E2B front); "" is the API's own.
  Result<uint16_t> listen_on_tcp(const std::string& address, uint16_t port,
                                 std::shared_ptr<const TransportFactory> tls = nullptr,
                                 const std::string& name = "");
  Result<uint16_t> listen_on_loopback(uint16_t port) { return listen_on_tcp("127.0.0.1", port); }
  Status launch(ThreadStart setup = {});
  // Answers every request with `handler` from now on, on the API thread (launched now if
  // it was not). Once only.
  Status serve(Handler handler);
  // The same with a handler that answers through its Responder, now or later.
  Status serve_deferred(DeferredHandler handler);
  // Before serve().
  void set_max_connections(size_t max) { max_connections_ = max; }
  // At most this many of them from one caller (Caller::key: one uid on the socket, one
  // address on TCP), so that one caller's idle or slow connections cannot take every place;
  // one more from it is closed as soon as it is accepted. Default: no cap of its own.
  void set_max_connections_per_caller(size_t max) { max_connections_per_caller_ = max; }
  // Changes the socket file's mode (bind() makes it owner-only): the file this server
  // made, never whatever another process may have put at its path since.
  Status set_socket_mode(mode_t mode) const;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // stop().
  ~HttpServer();

  // Stops the thread (after the request it is answering, if any), closes every
  // connection and removes the socket file. Idempotent; not from the handler.
  void stop();
  const std::string& path() const { return path_; }
  // The API thread's event loop, for a daemon whose other work runs on that same thread
  // (dsec-vmm pool: child processes' pidfds, timers). Use it only on the API thread (from
  // the handler or from callbacks on the loop), or before serve().
  io::EventLoop& loop() { return loop_; }

 private:
  struct Connection {
    UniqueFd fd;
    std::unique_ptr<Transport> transport;  // over fd, so after it: gone first
    std::unique_ptr<HttpConnection> http;
    io::WatchId watch{};
    uint32_t events = 0;    // what the watch waits for
    bool in_serve = false;  // serve() runs for it: an answer given now is sent from there
    // The client of the request whose answer is awaited: marked gone if the connection
    // closes, or the client ends its side, first.
    std::shared_ptr<ClientPresence> awaited_client;
    Caller caller;  // who connected, read at accept
    // Its deadline (HttpLimits' timeouts): the phase it was armed for, and whether bytes
    // went out since (a client that reads its answer earns more time).
    std::optional<io::TimerId> deadline;
    HttpConnection::Phase deadline_phase = HttpConnection::Phase::kAnswering;
    bool sent_since_armed = false;
    // The streamed answer being sent, the watch on its eventfd (while the output has room),
    // its heartbeat's timer, and whether it sent anything since that last fired.
    std::shared_ptr<BodyStream> stream;
    std::optional<io::WatchId> stream_watch;
    std::optional<io::TimerId> heartbeat;
    bool stream_active = false;
  };

  HttpServer(std::string path, UniqueFd listener, ino_t inode, io::EventLoop loop,
             HttpLimits limits);
  // The API thread: `setup`, then waits for serve() and runs the loop.
  void run(const ThreadStart& setup);
  void accept_clients(int listener);
  // Reads what the client sent, answers every whole request, writes what it can, then
  // watches for what the connection needs next (or closes it).
  void serve(uint64_t id);
  void serve_connection(uint64_t id, Connection& c);
  // One round of serve_connection: false when it closed the connection; `stream_ended`:
  // a streamed answer ended in it, so requests received meanwhile may wait.
  bool serve_once(uint64_t id, Connection& c, bool& stream_ended);
  // Watches for what the connection needs next, or closes it when nothing can move.
  void watch_connection(uint64_t id, Connection& c);
  // A deferred handler's answer to connection `id`'s request (gone: dropped).
  void answer(uint64_t id, const HttpResponse& response);
  // Moves a streamed answer's waiting bytes into the output, as far as it has room, and
  // ends the body once its producer finished; true when it ended it now.
  bool pump_stream(Connection& c);
  // Forgets the connection's stream: its watch and heartbeat; `gone`: tells its producer.
  void drop_stream(Connection& c, bool gone);
  void arm_heartbeat(uint64_t id, Connection& c);
  // Watches the stream's eventfd exactly while the output has room for its bytes.
  bool watch_stream(uint64_t id, Connection& c);
  bool read_from(Connection& c);
  bool write_to(Connection& c);
  // Logs why the transport failed, when it says (a TLS handshake's failure, throttled).
  void transport_failed(const Connection& c);
  void close_connection(uint64_t id);
  // A warning that may come once a connection (refused, a failed TLS handshake): one line
  // every few seconds at most, with how many there were since the last.
  struct ThrottledLog {
    uint64_t count = 0;
    std::chrono::steady_clock::time_point logged{};
    void log(const std::string& what, const std::string& last);
  };
  // Arms, keeps or cancels connection `id`'s deadline for the phase it is in now.
  void keep_deadline(uint64_t id, Connection& c);
  void on_deadline(uint64_t id);

  std::string path_;
  UniqueFd listener_;
  // listen_on_tcp()'s, if any.
  struct TcpListener {
    UniqueFd fd;
    std::shared_ptr<const TransportFactory> tls;
    std::string name;
  };
  std::vector<TcpListener> tcp_listeners_;
  ino_t inode_;  // the socket file's, so that stop() removes only our own
  io::EventLoop loop_;
  DeferredHandler handler_;
  HttpLimits limits_;
  size_t max_connections_ = kMaxConnections;
  size_t max_connections_per_caller_ = SIZE_MAX;
  ThrottledLog refused_;
  ThrottledLog tls_failed_;
  std::map<uint64_t, Connection> connections_;
  uint64_t next_id_ = 1;
  bool stopped_ = false;
  // What the API thread waits for between its set-up and its loop.
  std::mutex start_mutex_;
  std::condition_variable start_changed_;
  bool serving_ = false;   // serve() was called
  bool stopping_ = false;  // stop() was called
  std::thread thread_;     // last: it uses everything above
};

}  // namespace dsec::http

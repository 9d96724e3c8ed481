#include "vmm/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "vmm/io/unix_socket.h"

namespace dsec::http {
namespace {

// Binds `path`, replacing a socket file whose server is gone. The errors name the path;
// the caller adds its option (--api-sock, the pool's --socket).
Result<UniqueFd> bind_unix_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return fail(path + " exists and is not a socket", "choose another path; nothing was removed");
    }
    if (io::connect_unix(path)) {
      return fail(path + ": another process serves there",
                  "choose another path, or stop that process first");
    }
    // Nobody answers (ECONNREFUSED): a server that is gone left it behind.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return fail_errno(path + ": cannot remove the stale socket", errno);
    }
  }
  auto fd = DSEC_TRY(io::listen_unix(path));
  // Whoever can connect can do whatever the handler does: the owner only, unless
  // set_socket_mode() says otherwise.
  if (::chmod(path.c_str(), 0600) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return fail_errno(path + ": chmod", err);
  }
  return fd;
}

// A listening TCP socket on `address`:`port` (numeric).
Result<UniqueFd> listen_tcp(const std::string& address, uint16_t port) {
  const std::string where = address + ":" + std::to_string(port);
  // Parsed by hand: the binary is static, and getaddrinfo would want glibc's NSS at run time.
  sockaddr_storage bound{};
  socklen_t bound_size = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&bound);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&bound);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    bound_size = sizeof *v4;
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    bound_size = sizeof *v6;
  } else {
    return fail("API on " + where + ": not a numeric IPv4 or IPv6 address",
                "give one such as 127.0.0.1, 0.0.0.0 or ::1");
  }
  UniqueFd fd(::socket(bound.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail_errno("API on " + where + ": socket", errno);
  }
  const int on = 1;
  // A daemon started again binds its port at once, with its old connections in TIME_WAIT.
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) {
    return fail_errno("API on " + where + ": SO_REUSEADDR", errno);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&bound), bound_size) != 0) {
    const int err = errno;
    return fail_errno(
        "API on " + where + ": bind", err,
        err == EADDRINUSE ? "another process listens there: choose another port" : "");
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return fail_errno("API on " + where + ": listen", errno);
  }
  return fd;
}

// "a.b.c.d:port" or "[v6]:port"; empty when the address is of neither family.
std::string address_text(const sockaddr_storage& address) {
  std::array<char, INET6_ADDRSTRLEN> text{};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &v4.sin_addr, text.data(), text.size());
    return std::string(text.data()) + ":" + std::to_string(ntohs(v4.sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text.data(), text.size());
    return "[" + std::string(text.data()) + "]:" + std::to_string(ntohs(v6.sin6_port));
  }
  return {};
}

// Who is at the other end of an accepted connection; nullopt when the kernel cannot say.
std::optional<Caller> caller_of(int fd, bool unix_socket) {
  Caller caller;
  if (unix_socket) {
    ucred credentials{};
    socklen_t size = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
      return std::nullopt;
    }
    caller.transport = Caller::Transport::kUnix;
    caller.uid = credentials.uid;
    caller.gid = credentials.gid;
    caller.pid = credentials.pid;
    return caller;
  }
  sockaddr_storage peer{};
  socklen_t size = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) != 0) {
    return std::nullopt;
  }
  caller.transport = Caller::Transport::kTcp;
  caller.peer = address_text(peer);
  return caller;
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::bind(const std::string& path, HttpLimits limits) {
  auto listener = DSEC_TRY(bind_unix_socket(path));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return fail_errno(path + ": stat", err);
  }
  auto loop = io::EventLoop::create(64);
  if (!loop) {
    ::unlink(path.c_str());
    return std::unexpected(loop.error().with_context("API event loop"));
  }
  // From here on the destructor removes the socket file.
  return std::unique_ptr<HttpServer>(
      new HttpServer(path, std::move(listener), st.st_ino, std::move(*loop), limits));
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(const std::string& path, Handler handler,
                                                      HttpLimits limits) {
  auto server = DSEC_TRY(bind(path, limits));
  DSEC_TRY(server->serve(std::move(handler)));
  return server;
}

Status HttpServer::launch(ThreadStart setup) {
  if (thread_.joinable() || stopped_) {
    return fail("the API thread runs already, or has stopped");
  }
  try {
    thread_ = std::thread([this, setup = std::move(setup)] { run(setup); });
  } catch (const std::system_error& e) {
    return fail_errno("API thread: cannot create it", e.code().value());
  }
  return ok();
}

Result<uint16_t> HttpServer::listen_on_tcp(const std::string& address, uint16_t port,
                                           std::shared_ptr<const TransportFactory> tls,
                                           const std::string& name) {
  const bool named_already =
      std::ranges::any_of(tcp_listeners_, [&](const TcpListener& l) { return l.name == name; });
  if (named_already || handler_ || stopped_) {
    return fail("the API listens on a TCP port named '" + name + "' already, or serves already");
  }
  UniqueFd listener = DSEC_TRY(listen_tcp(address, port));
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &size) != 0) {
    return fail_errno("API on " + address + ": getsockname", errno);
  }
  tcp_listeners_.push_back(
      TcpListener{.fd = std::move(listener), .tls = std::move(tls), .name = name});
  // Both families keep the port at the same offset.
  return ntohs(reinterpret_cast<const sockaddr_in&>(bound).sin_port);
}

Status HttpServer::set_socket_mode(mode_t mode) const {
  // Through an O_PATH descriptor checked to be our socket: chmod on the path would follow a
  // symbolic link swapped in by whoever can write the socket's directory.
  UniqueFd file(::open(path_.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!file || ::fstat(file.get(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != inode_) {
    return fail(path_ + " is no longer the socket this server made",
                "stop whatever replaced it, and start again");
  }
  const std::string proc_path = "/proc/self/fd/" + std::to_string(file.get());
  if (::chmod(proc_path.c_str(), mode) != 0) {
    return fail_errno(path_ + ": chmod", errno);
  }
  return ok();
}

Status HttpServer::serve(Handler handler) {
  return serve_deferred(
      [handler = std::move(handler)](const HttpRequest& request, Responder respond) {
        respond(handler(request));
      });
}

Status HttpServer::serve_deferred(DeferredHandler handler) {
  if (handler_ || stopped_) {
    return fail("the API server serves already, or has stopped");
  }
  if (!thread_.joinable()) {
    DSEC_TRY(launch());
  }
  handler_ = std::move(handler);
  // The loop does not run yet: its thread waits for serving_, set below under the lock.
  DSEC_TRY(loop_.add_fd_watch(listener_.get(), [this] { accept_clients(listener_.get()); }));
  for (const TcpListener& tcp : tcp_listeners_) {
    DSEC_TRY(loop_.add_fd_watch(tcp.fd.get(), [this, fd = tcp.fd.get()] { accept_clients(fd); }));
  }
  {
    const std::lock_guard lock(start_mutex_);
    serving_ = true;
  }
  start_changed_.notify_all();
  spdlog::info("api: serving on {}", path_);
  return ok();
}

void HttpServer::run(const ThreadStart& setup) {
  pthread_setname_np(pthread_self(), "dsec-api");
  if (setup) {
    if (auto set = setup(); !set) {
      spdlog::error("api: {}; the API socket answers nothing", set.error().message());
      return;
    }
  }
  {
    std::unique_lock lock(start_mutex_);
    start_changed_.wait(lock, [this] { return serving_ || stopping_; });
    if (stopping_) {
      return;
    }
  }
  if (auto ran = loop_.run(); !ran) {
    spdlog::error("api: the event loop failed: {}; the API socket answers no more",
                  ran.error().message());
  }
}

HttpServer::HttpServer(std::string path, UniqueFd listener, ino_t inode, io::EventLoop loop,
                       HttpLimits limits)
    : path_(std::move(path)),
      listener_(std::move(listener)),
      inode_(inode),
      loop_(std::move(loop)),
      limits_(limits) {}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::stop() {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  {
    const std::lock_guard lock(start_mutex_);
    stopping_ = true;
  }
  start_changed_.notify_all();
  loop_.stop();
  if (thread_.joinable()) {
    thread_.join();
  }
  for (auto& [id, c] : connections_) {
    if (c.stream) {
      c.stream->close_reader();  // its producer stops waiting for a client
    }
  }
  connections_.clear();
  listener_.reset();
  tcp_listeners_.clear();
  // Only the file this server made: another process may have put its own there since.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_ino == inode_) {
    ::unlink(path_.c_str());
  }
}

void HttpServer::accept_clients(int listener) {
  while (true) {
    UniqueFd client(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client) {
      if (errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      if (errno != EAGAIN) {
        spdlog::warn("api: accept on {}: {}", path_, std::strerror(errno));
      }
      return;
    }
    if (connections_.size() >= max_connections_) {
      refused_.log("closed new connection(s) at once",
                   fmt::format("{} clients connected already", max_connections_));
      continue;
    }
    auto caller = caller_of(client.get(), listener == listener_.get());
    if (!caller) {
      spdlog::warn("api: cannot tell who connected ({}); closing it", std::strerror(errno));
      continue;
    }
    if (max_connections_per_caller_ < max_connections_) {
      const std::string key = caller->key();
      const auto same =
          std::count_if(connections_.begin(), connections_.end(),
                        [&](const auto& kv) { return kv.second.caller.key() == key; });
      if (static_cast<size_t>(same) >= max_connections_per_caller_) {
        refused_.log("closed new connection(s) at once",
                     fmt::format("{} has {} connections already, its most", key, same));
        continue;
      }
    }
    std::unique_ptr<Transport> transport;
    const auto tcp = std::ranges::find_if(
        tcp_listeners_, [listener](const TcpListener& l) { return l.fd.get() == listener; });
    if (tcp != tcp_listeners_.end()) {
      caller->listener = tcp->name;
    }
    if (tcp != tcp_listeners_.end() && tcp->tls) {
      auto session = tcp->tls->session(client.get());
      if (!session) {
        spdlog::warn("api: {}; closing a client of {}", session.error().message(), caller->peer);
        continue;
      }
      transport = std::move(*session);
    } else {
      transport = std::make_unique<PlainTransport>(client.get());
    }
    const uint64_t id = next_id_++;
    Connection& c = connections_[id];
    c.fd = std::move(client);
    c.transport = std::move(transport);
    c.http = std::make_unique<HttpConnection>(limits_);
    c.caller = std::move(*caller);
    serve(id);
  }
}

void HttpServer::ThrottledLog::log(const std::string& what, const std::string& last) {
  ++count;
  const auto now = std::chrono::steady_clock::now();
  if (now - logged < std::chrono::seconds(5)) {
    return;
  }
  spdlog::warn("api: {}: {}; the last: {}", what, count, last);
  count = 0;
  logged = now;
}

bool HttpServer::read_from(Connection& c) {
  std::array<char, size_t{16} * 1024> buffer{};
  while (c.http->wants_input()) {
    const TransportIo io = c.transport->receive(buffer);
    switch (io.kind) {
      case TransportIo::Kind::kDone:
        c.http->receive({buffer.data(), io.bytes});
        break;
      case TransportIo::Kind::kEof:
        c.http->receive_eof();
        break;
      case TransportIo::Kind::kWouldBlock:
        return true;
      case TransportIo::Kind::kFailed:
        transport_failed(c);
        return false;  // reset by the client, or its TLS broken: nobody to answer
    }
  }
  return true;
}

bool HttpServer::write_to(Connection& c) {
  while (!c.http->output().empty()) {
    const TransportIo io = c.transport->send(c.http->output());
    switch (io.kind) {
      case TransportIo::Kind::kDone:
        c.http->consume_output(io.bytes);
        c.sent_since_armed = true;
        break;
      case TransportIo::Kind::kWouldBlock:
        return true;
      case TransportIo::Kind::kEof:
      case TransportIo::Kind::kFailed:
        transport_failed(c);
        return false;
    }
  }
  return true;
}

void HttpServer::transport_failed(const Connection& c) {
  const std::string why = c.transport->failure();
  if (why.empty()) {
    return;  // the client went away
  }
  if (c.transport->established()) {
    spdlog::debug("api: TLS with {} failed: {}", c.caller.peer, why);
    return;
  }
  // A scanner, a client that does not trust the certificate, or plain HTTP on the TLS port:
  // one line every few seconds, however many there are.
  tls_failed_.log("closed TLS connection(s) whose handshake failed",
                  fmt::format("{}: {}", c.caller.peer, why));
}

void HttpServer::serve(uint64_t id) {
  const auto it = connections_.find(id);
  if (it == connections_.end() || it->second.in_serve) {
    return;
  }
  it->second.in_serve = true;
  serve_connection(id, it->second);
  // It may be gone: closed in there.
  if (const auto still = connections_.find(id); still != connections_.end()) {
    still->second.in_serve = false;
  }
}

void HttpServer::answer(uint64_t id, const HttpResponse& response) {
  const auto it = connections_.find(id);
  if (it == connections_.end()) {
    return;  // the client went away, or the server stopped
  }
  Connection& c = it->second;
  c.awaited_client.reset();
  c.http->respond(response);
  if (response.stream && c.http->streaming()) {
    c.stream = response.stream;
    c.stream_active = false;
    arm_heartbeat(id, c);
  } else if (response.stream) {
    response.stream->close_reader();  // a HEAD's answer, or one to a connection closing
  }
  serve(id);  // from inside serve() for this connection, that serve() goes on
}

bool HttpServer::pump_stream(Connection& c) {
  if (!c.stream) {
    return false;
  }
  if (const size_t room = c.http->output_room(); room > 0) {
    const std::string bytes = c.stream->take(room);
    if (!bytes.empty()) {
      c.http->send_chunk(bytes);
      c.stream_active = true;
    }
  }
  if (!c.stream->drained()) {
    return false;
  }
  c.http->end_stream();
  drop_stream(c, /*gone=*/false);
  return true;
}

void HttpServer::drop_stream(Connection& c, bool gone) {
  if (const auto watch = c.stream_watch) {
    static_cast<void>(loop_.remove_watch(*watch));
    c.stream_watch.reset();
  }
  if (const auto timer = c.heartbeat) {
    static_cast<void>(loop_.cancel_timer(*timer));
    c.heartbeat.reset();
  }
  if (c.stream && gone) {
    c.stream->close_reader();
  }
  c.stream.reset();
}

void HttpServer::arm_heartbeat(uint64_t id, Connection& c) {
  const BodyStream::Options& options = c.stream->options();
  if (options.heartbeat_interval.count() == 0 || options.heartbeat.empty()) {
    return;
  }
  auto timer = loop_.add_timer(options.heartbeat_interval, [this, id] {
    const auto it = connections_.find(id);
    if (it == connections_.end() || !it->second.stream) {
      return;
    }
    Connection& beating = it->second;
    beating.heartbeat.reset();  // it fired
    // Quiet since the last beat, and nothing waits: tell the client the stream lives. It
    // goes through the stream, so it never splits a message the producer wrote.
    if (!beating.stream_active && beating.http->output().empty()) {
      beating.stream->write(beating.stream->options().heartbeat, /*wait=*/false);
    }
    beating.stream_active = false;
    arm_heartbeat(id, beating);
  });
  if (timer) {
    c.heartbeat = *timer;
  }
}

bool HttpServer::watch_stream(uint64_t id, Connection& c) {
  const bool wanted = c.stream && c.http->output_room() > 0;
  // A watch fires on the eventfd's wakeups: one kept while it is readable already (bytes
  // left that did not fit) would not fire again, so it is armed afresh, and fires at once.
  const bool readable = wanted && c.stream->ready();
  if (wanted == c.stream_watch.has_value() && !readable) {
    return true;
  }
  if (const auto watch = c.stream_watch) {
    static_cast<void>(loop_.remove_watch(*watch));
    c.stream_watch.reset();
  }
  if (!wanted) {
    return true;
  }
  auto watch = loop_.add_fd_watch(c.stream->fd(), [this, id] { serve(id); });
  if (!watch) {
    spdlog::warn("api: cannot watch a streamed answer: {}", watch.error().message());
    return false;
  }
  c.stream_watch = *watch;
  return true;
}

void HttpServer::serve_connection(uint64_t id, Connection& c) {
  // Bytes a TLS session decrypted and holds are no event on the socket: while the connection
  // takes input and the session holds some, serve it again rather than wait for one.
  // A stream that ended lets the requests received meanwhile be answered: again, too.
  bool again = false;
  do {
    if (!serve_once(id, c, again)) {
      return;  // closed
    }
  } while (again || (c.http->wants_input() && c.transport->has_buffered_input() &&
                     !c.http->awaiting_response() && !c.http->streaming()));
  watch_connection(id, c);
}

bool HttpServer::serve_once(uint64_t id, Connection& c, bool& stream_ended) {
  stream_ended = false;
  if (!read_from(c)) {
    close_connection(id);
    return false;
  }
  pump_stream(c);
  // Answer every whole request, writing after each, so that a client's pipelined requests
  // find their answers in order and the output never grows past one answer per round.
  while (true) {
    auto request = c.http->next_request();
    if (!request) {
      break;
    }
    spdlog::debug("api: {} {}", request->method_text, request->path);
    request->caller = c.caller;
    handler_(*request, [this, id](const HttpResponse& response) { answer(id, response); });
    if (c.http->awaiting_response()) {
      c.awaited_client = request->client;
      break;  // answered later: answer() serves the connection again
    }
    pump_stream(c);
    if (!write_to(c) || !read_from(c)) {
      close_connection(id);
      return false;
    }
  }
  if (!write_to(c)) {
    close_connection(id);
    return false;
  }
  // The output made room: more of a stream fits (and it may end).
  stream_ended = pump_stream(c);
  if (!write_to(c) || c.http->finished()) {
    close_connection(id);
    return false;
  }
  return true;
}

void HttpServer::watch_connection(uint64_t id, Connection& c) {
  const uint32_t events = (c.http->wants_input() ? POLLIN : 0) |
                          (c.http->output().empty() ? 0 : POLLOUT) | c.transport->wanted_events();
  if (events == 0 && c.http->awaiting_response()) {
    // The client shut its side and may wait for the answer still to come: no watch until
    // then. Work done for it alone may stop (an exec): it sends nothing more.
    if (c.awaited_client) {
      c.awaited_client->mark_gone();
    }
    if (c.events != 0) {
      static_cast<void>(loop_.remove_watch(c.watch));
      c.events = 0;
    }
    keep_deadline(id, c);
    return;
  }
  if (events == 0) {
    // Neither side can move (a streamed answer's client shut its side: it is gone):
    // nothing more will happen on it.
    close_connection(id);
    return;
  }
  if (!watch_stream(id, c)) {
    close_connection(id);
    return;
  }
  keep_deadline(id, c);
  if (events == c.events) {
    return;
  }
  if (c.events != 0) {
    static_cast<void>(loop_.remove_watch(c.watch));
  }
  auto watch = loop_.add_fd_watch(
      c.fd.get(), [this, id] { serve(id); }, events);
  if (!watch) {
    spdlog::warn("api: cannot watch a client: {}", watch.error().message());
    c.events = 0;  // the old watch is gone already
    close_connection(id);
    return;
  }
  c.watch = *watch;
  c.events = events;
}

void HttpServer::close_connection(uint64_t id) {
  const auto it = connections_.find(id);
  if (it == connections_.end()) {
    return;
  }
  if (it->second.events != 0) {
    static_cast<void>(loop_.remove_watch(it->second.watch));
  }
  if (const auto deadline = it->second.deadline) {
    static_cast<void>(loop_.cancel_timer(*deadline));
  }
  if (it->second.awaited_client) {
    it->second.awaited_client->mark_gone();  // its answer has nowhere to go now
  }
  drop_stream(it->second, /*gone=*/true);
  connections_.erase(it);
}

void HttpServer::keep_deadline(uint64_t id, Connection& c) {
  using Phase = HttpConnection::Phase;
  // A TLS handshake is part of the first request's headers: a client that stalls in it is
  // held no longer than one that stalls in its headers.
  const bool handshake = !c.transport->established();
  const Phase phase = handshake ? Phase::kHeaders : c.http->phase();
  // Receiving a request keeps the deadline its first byte set; sending keeps it while the
  // client reads nothing.
  const bool progress = phase == Phase::kSending && c.sent_since_armed;
  if (c.deadline && phase == c.deadline_phase && !progress) {
    return;
  }
  if (const auto armed = c.deadline) {
    static_cast<void>(loop_.cancel_timer(*armed));
    c.deadline.reset();
  }
  c.deadline_phase = phase;
  c.sent_since_armed = false;
  const std::chrono::milliseconds timeout =
      handshake ? limits_.header_timeout : c.http->phase_timeout();
  if (timeout.count() == 0) {
    return;  // the handler's time, or a deadline switched off
  }
  auto timer = loop_.add_timer(timeout, [this, id] { on_deadline(id); });
  if (!timer) {
    spdlog::warn("api: cannot set a client's deadline: {}; closing it", timer.error().message());
    close_connection(id);
    return;
  }
  c.deadline = *timer;
}

void HttpServer::on_deadline(uint64_t id) {
  const auto it = connections_.find(id);
  if (it == connections_.end()) {
    return;
  }
  it->second.deadline.reset();  // it fired
  using Phase = HttpConnection::Phase;
  const bool handshake = !it->second.transport->established();
  const auto timeout = handshake ? limits_.header_timeout : it->second.http->phase_timeout();
  const char* why = "";
  switch (it->second.deadline_phase) {
    case Phase::kIdle:
      why = "sent no request for";
      break;
    case Phase::kHeaders:
      why = handshake ? "took longer for its TLS handshake than"
                      : "took longer for its request's headers than";
      break;
    case Phase::kBody:
      why = "took longer for its request's body than";
      break;
    case Phase::kSending:
      why = "read none of its answer for";
      break;
    case Phase::kAnswering:
      break;
  }
  // An idle client is routine; the others are worth a line.
  spdlog::log(
      it->second.deadline_phase == Phase::kIdle ? spdlog::level::debug : spdlog::level::info,
      "api: closing a client that {} {} ms", why, timeout.count());
  close_connection(id);
}

}  // namespace dsec::http

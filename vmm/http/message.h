// An HTTP/1.1 request as a handler sees it (the VMM's API, the pool daemon's), and the
// response it answers with. Plain values: connection.h turns bytes into requests and
// responses into bytes; router and the endpoints only ever see these.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsec::http {

class BodyStream;

enum class Method { kGet, kPut, kPatch, kPost, kDelete, kOther };

// "GET", "PUT", ...; "?" for kOther.
std::string_view method_name(Method method);

// Who sent a request, as the server learned it when it accepted the connection.
struct Caller {
  enum class Transport { kNone, kUnix, kTcp };
  Transport transport = Transport::kNone;  // kNone: no socket (a test, the fuzzer)
  // kUnix: the peer's credentials from SO_PEERCRED, as they were when it connected.
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  pid_t pid = 0;
  // kTcp: the peer's address and port ("192.0.2.7:51234", "[2001:db8::1]:51234").
  std::string peer{};
  // kTcp: the name of the listener it came through (HttpServer::listen_on_tcp); "" for the
  // API's own.
  std::string listener{};

  // Who the caller is for a per-caller limit: "uid:N" on a Unix socket, the address
  // without its port on TCP; empty with no socket.
  std::string key() const;
};

// Whether the client of a request answered later (HttpServer::serve_deferred) is still
// there: the server marks it gone when the connection closes, or when the client ends its
// side before its answer. Work done for the client alone (an exec) registers what stops it.
// Any thread.
class ClientPresence {
 public:
  // Runs `stop` once the client is gone: now, if it is already.
  void on_gone(std::function<void()> stop);
  void mark_gone();
  bool gone() const;

 private:
  mutable std::mutex mutex_;
  bool gone_ = false;
  std::vector<std::function<void()>> stops_;
};

struct HttpRequest {
  Method method = Method::kOther;
  std::string method_text;  // as the client sent it, for messages
  std::string path;         // the URL's path, without query or fragment
  std::string query;        // after '?', as sent; only where HttpLimits::allow_query
  // Header names lower-cased, values as sent (leading and trailing blanks removed).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close", or 1.0 with keep-alive
  Caller caller;           // set by the server, never from the request's bytes
  // Set by the server for each request it dispatches: whether its client is still there.
  std::shared_ptr<ClientPresence> client = std::make_shared<ClientPresence>();

  // The first header called `name` (lower-case); empty when absent.
  std::string_view header(std::string_view name) const;
  // The first query parameter called `name`, percent-decoded ('+' a space); nullopt when
  // absent or when its value's escapes are malformed.
  std::optional<std::string> query_param(std::string_view name) const;
  // Every query parameter, decoded, in order; nullopt when one's escapes are malformed.
  std::optional<std::vector<std::pair<std::string, std::string>>> query_params() const;
};

struct HttpResponse {
  int status = 200;
  std::string body;  // JSON when not empty, unless content_type says otherwise
  std::string content_type = "application/json";
  // Extra headers, e.g. Allow on a 405.
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: the body is this stream's (body_stream.h), sent as it comes in chunked transfer
  // encoding after `body`, which is then its first piece.
  std::shared_ptr<BodyStream> stream{};

  // 200 with `body` as JSON.
  static HttpResponse json(const nlohmann::json& body, int status = 200);
  // 200 with `body` as plain text (Prometheus' exposition format, say).
  static HttpResponse text(std::string body, std::string content_type);
  // 204, no body: a request that succeeded and has nothing to say.
  static HttpResponse no_content();
  // An error: `status` (400 unless 404/405) with Firecracker's {"fault_message": ...}.
  static HttpResponse fault(const std::string& message, int status = 400);

  // The status line, headers and body, ready for the socket; `close` adds "Connection: close".
  // A streamed response's: the head with "Transfer-Encoding: chunked", and `body` as its
  // first chunk.
  std::string serialize(bool close) const;

  // One chunk of a streamed body ("" for none: an empty chunk would end the body), and the
  // body's end.
  static std::string chunk(std::string_view bytes);
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
};

// Answers one request, now or later (once), on the thread of the server's event loop. One
// that is dropped unanswered leaves its client waiting until it hangs up.
using Responder = std::move_only_function<void(HttpResponse)>;

}  // namespace dsec::http

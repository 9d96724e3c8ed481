// A small HTTP/1.1 client over a Unix socket, for a VMM's API (`dsec-vmm snapshot ...`) and
// the pool daemon's (the library's PoolClient): one request per connection, its answer parsed by
// http_parser, errors that say what to do (no socket there, nobody serving it, the
// server's fault_message).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::http {

struct HttpReply {
  int status = 0;
  std::string body;
};

// Who serves the socket, as the client's errors name it (a VMM's API: vmm/api's
// vmm_api_client; the pool daemon: the library's PoolClient).
struct HttpServerKind {
  std::string socket = "socket";  // "no socket at PATH"
  std::string name = "server";    // "the server refused ...", "is the server stuck?"
  // What to do when no socket is there or nobody serves it.
  std::string start_hint = "start its server";
};

// The answer's {"fault_message": ...}, else its body (or "no fault_message").
std::string fault_message_of(const HttpReply& reply);

class HttpClient {
 public:
  // The largest answer taken; the API's answers are a few hundred bytes.
  static constexpr size_t kMaxReplyBytes = 1 << 20;

  // `timeout` bounds each request, from connect to the whole answer.
  HttpClient(std::string socket_path, std::chrono::milliseconds timeout, HttpServerKind server = {})
      : socket_path_(std::move(socket_path)), timeout_(timeout), server_(std::move(server)) {}

  // The raw exchange: any status comes back as a reply.
  Result<HttpReply> request(std::string_view method, std::string_view path,
                            const std::string& body) const;
  // A GET whose answer must be 200 with JSON.
  Result<nlohmann::json> get(std::string_view path) const;
  // A PUT or PATCH whose answer must be 2xx; anything else is an Error with the server's
  // fault_message.
  Status send(std::string_view method, std::string_view path, const nlohmann::json& body) const;

  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  HttpServerKind server_;
};

}  // namespace dsec::http

// A small HTTP/1.1 client for a VMM's API socket (`dsec-vmm snapshot ...`): one request
// per connection, its answer parsed by http_parser, errors that say what to do (no
// socket there, nobody serving it, the VMM's fault_message).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::api {

struct HttpReply {
  int status = 0;
  std::string body;
};

class ApiClient {
 public:
  // The largest answer taken; the API's answers are a few hundred bytes.
  static constexpr size_t kMaxReplyBytes = 1 << 20;

  // `timeout` bounds each request, from connect to the whole answer.
  ApiClient(std::string socket_path, std::chrono::milliseconds timeout)
      : socket_path_(std::move(socket_path)), timeout_(timeout) {}

  // The raw exchange: any status comes back as a reply.
  Result<HttpReply> request(std::string_view method, std::string_view path,
                            const std::string& body) const;
  // A GET whose answer must be 200 with JSON.
  Result<nlohmann::json> get(std::string_view path) const;
  // A PUT or PATCH whose answer must be 2xx; anything else is an Error with the VMM's
  // fault_message.
  Status send(std::string_view method, std::string_view path, const nlohmann::json& body) const;

  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dsec::api

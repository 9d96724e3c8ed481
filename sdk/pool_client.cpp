#include <fmt/format.h>

#include "dsec/pool.h"
#include "sdk/error_mapping.h"
#include "sdk/pool_replies.h"
#include "vmm/http/client.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/pool_requests.h"

namespace dsec::sdk {
namespace {

// The socket's server as the transport's errors name it, and how to start one there.
http::HttpServerKind pool_server(const std::string& socket) {
  return {.socket = "pool socket",
          .name = "pool daemon",
          .start_hint = "start the pool daemon: dsec-vmm pool --state-dir DIR --socket " + socket +
                        " (docs/pool.md)"};
}

Status check_name(const std::string& name, std::string_view what) {
  return detail::with_code(pool::check_name(name, what), ErrorCode::kInvalidArgument);
}

Status check_image_name(const std::string& name) {
  return detail::with_code(pool::check_image_name(name), ErrorCode::kInvalidArgument);
}

Status check_duration(std::optional<std::chrono::seconds> duration, const char* what) {
  if (duration && duration->count() < 0) {
    return std::unexpected(Error(ErrorCode::kInvalidArgument,
                                 fmt::format("{} is negative: {} s", what, duration->count()),
                                 "give 0 for none, or a number of seconds"));
  }
  return {};
}

// One request to the daemon on `socket`: the answer's body when its status is `expected`,
// else an Error with the daemon's status and fault_message.
Result<std::string> exchange(const std::string& socket, const PoolClientOptions& options,
                             std::string_view method, const std::string& path,
                             const std::string& body, int expected) {
  const http::HttpClient client(socket, options.request_timeout, pool_server(socket));
  auto reply = client.request(method, path, body);
  if (!reply) {
    return std::unexpected(detail::to_sdk_error(reply.error(), ErrorCode::kPool));
  }
  if (reply->status != expected) {
    return std::unexpected(
        Error(ErrorCode::kPool,
              fmt::format("the pool daemon on {} refused {} {} ({}): {}", socket, method, path,
                          reply->status, http::fault_message_of(*reply)),
              {}, 0, reply->status));
  }
  return std::move(reply->body);
}

// The answer's body read by `read` (pool_replies.h).
template <typename T>
Result<T> read_answer(const std::string& body, std::string_view method, const std::string& path,
                      dsec::Result<T> (*read)(const nlohmann::json&)) {
  const auto context = fmt::format("the pool daemon's answer to {} {}", method, path);
  const auto value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return std::unexpected(Error(ErrorCode::kPool, context + " is not JSON"));
  }
  auto parsed = read(value);
  if (!parsed) {
    return std::unexpected(
        detail::to_sdk_error(parsed.error().with_context(context), ErrorCode::kPool));
  }
  return std::move(parsed).value();
}

}  // namespace

PoolClient::PoolClient(std::string socket_path, PoolClientOptions options)
    : socket_path_(std::move(socket_path)), options_(options) {}

Result<PoolImage> PoolClient::register_image(const PoolImage& image) const {
  DSEC_TRY(check_image_name(image.name));
  DSEC_TRY(check_duration(image.ttl, "PoolImage::ttl"));
  DSEC_TRY(check_duration(image.idle_timeout, "PoolImage::idle_timeout"));
  const std::string path = "/images/" + image.name;
  const auto body = DSEC_TRY(
      exchange(socket_path_, options_, "PUT", path, detail::pool_image_body(image).dump(), 200));
  return read_answer(body, "PUT", path, detail::pool_image_of);
}

Result<std::vector<PoolImageStatus>> PoolClient::images() const {
  const auto body = DSEC_TRY(exchange(socket_path_, options_, "GET", "/images", "", 200));
  return read_answer(body, "GET", "/images", detail::pool_images_of);
}

Result<PoolSandbox> PoolClient::acquire(const AcquireOptions& options) const {
  DSEC_TRY(check_image_name(options.image));
  DSEC_TRY(check_duration(options.ttl, "AcquireOptions::ttl"));
  DSEC_TRY(check_duration(options.idle_timeout, "AcquireOptions::idle_timeout"));
  const auto body = DSEC_TRY(exchange(socket_path_, options_, "POST", "/sandboxes",
                                      detail::acquire_body(options).dump(), 201));
  return read_answer(body, "POST", "/sandboxes", detail::pool_sandbox_of);
}

Status PoolClient::release(const std::string& id) const {
  DSEC_TRY(check_name(id, "a sandbox's id"));
  DSEC_TRY(exchange(socket_path_, options_, "DELETE", "/sandboxes/" + id, "", 204));
  return {};
}

Status PoolClient::keepalive(const std::string& id) const {
  DSEC_TRY(check_name(id, "a sandbox's id"));
  DSEC_TRY(exchange(socket_path_, options_, "POST", "/sandboxes/" + id + "/keepalive", "", 204));
  return {};
}

Result<PoolSandbox> PoolClient::pause(const std::string& id) const {
  DSEC_TRY(check_name(id, "a sandbox's id"));
  const std::string path = "/sandboxes/" + id + "/pause";
  const auto body = DSEC_TRY(exchange(socket_path_, options_, "POST", path, "", 200));
  return read_answer(body, "POST", path, detail::pool_sandbox_of);
}

Result<PoolSandbox> PoolClient::resume(const std::string& id) const {
  DSEC_TRY(check_name(id, "a sandbox's id"));
  const std::string path = "/sandboxes/" + id + "/resume";
  const auto body = DSEC_TRY(exchange(socket_path_, options_, "POST", path, "", 200));
  return read_answer(body, "POST", path, detail::pool_sandbox_of);
}

Status PoolClient::snapshot(const std::string& id, const std::string& name) const {
  DSEC_TRY(check_name(id, "a sandbox's id"));
  DSEC_TRY(check_image_name(name));
  DSEC_TRY(exchange(socket_path_, options_, "POST", "/sandboxes/" + id + "/snapshot",
                    nlohmann::json{{"name", name}}.dump(), 201));
  return {};
}

Result<PoolSandbox> PoolClient::sandbox(const std::string& id) const {
  DSEC_TRY(check_name(id, "a sandbox's id"));
  const std::string path = "/sandboxes/" + id;
  const auto body = DSEC_TRY(exchange(socket_path_, options_, "GET", path, "", 200));
  return read_answer(body, "GET", path, detail::pool_sandbox_of);
}

Result<std::vector<PoolSandbox>> PoolClient::sandboxes() const {
  const auto body = DSEC_TRY(exchange(socket_path_, options_, "GET", "/sandboxes", "", 200));
  return read_answer(body, "GET", "/sandboxes", detail::pool_sandboxes_of);
}

}  // namespace dsec::sdk

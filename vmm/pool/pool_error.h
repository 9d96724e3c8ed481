// How a pool request fails, as a kind the pool's domain logic speaks; only the API's edge
// (pool_api.cpp) turns a kind into an HTTP status.
#pragma once

#include <expected>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace dsec::pool {

enum class Failure {
  kInvalid,          // the request itself is wrong: a bad field, a directory that holds no image
  kNotFound,         // no such image or sandbox (also another tenant's sandbox)
  kConflict,         // not in a state that allows it: not acquired, paused, exists already
  kGone,             // the sandbox ended; the message says how
  kFull,             // an image's max or the host's memory: try later
  kQuota,            // the caller's own quota: release one of its sandboxes
  kAgentFailed,      // the sandbox's agent or VMM failed the request
  kUnavailable,      // the daemon could not do it now (no clone came up, no event-loop watch)
  kUnauthenticated,  // no caller known: a missing or wrong token
  kForbidden,        // a caller known, and not allowed this
};

// A request the pool refuses: its kind and what the client should do.
struct PoolError {
  Failure kind = Failure::kInvalid;
  std::string message;
};
template <typename T>
using PoolResult = std::expected<T, PoolError>;
inline PoolError error(Failure kind, std::string message) {
  return PoolError{.kind = kind, .message = std::move(message)};
}
// How a request that may finish later (acquire, exec, pause...) answers, on the loop's
// thread: with the body to send, or why it failed.
using PoolAnswer = std::move_only_function<void(PoolResult<nlohmann::json>)>;

}  // namespace dsec::pool

// A client of a node's pool daemon (`dsec-vmm pool`, docs/pool.md) over its Unix socket:
// register a warm image, acquire a sandbox of it, run commands in it through a
// SandboxClient on its vsock socket, release it. The daemon owns the sandboxes' VMMs;
// a PoolClient owns nothing but the socket's path, and each call is one HTTP request on a
// connection of its own, so calls from several threads may overlap (the daemon answers
// them one at a time).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsec/error.h"
#include "dsec/sandbox_client.h"

namespace dsec::sdk {

enum class PoolSandboxState { kStarting, kReady, kInUse, kStopping };

// A sandbox of the pool, as the daemon reports it. The pool gives its clones no network of
// their own: a sandbox has its vsock socket and no network address.
struct PoolSandbox {
  std::string id{};  // what release, keepalive and PoolClient::sandbox take
  std::string image{};
  PoolSandboxState state = PoolSandboxState::kInUse;
  int pid = 0;               // its VMM's, on the daemon's host
  std::string vsock_path{};  // its guest agent's socket
  // The time it has left to live; none when it is not acquired or its lease has no time
  // to live.
  std::optional<std::chrono::milliseconds> expires_in = std::nullopt;
  // How long it may go without a request that names it; none when not acquired or never.
  std::optional<std::chrono::milliseconds> idle_timeout = std::nullopt;
  bool paused = false;  // PoolClient::pause stopped its vCPUs

  // A client of its guest agent: exec, copy_in, copy_out, straight to the vsock socket
  // (output streamed, no 256 KiB cut). Its pause, resume and snapshot fail with
  // ErrorCode::kInvalidArgument: the daemon must know of those, so they are PoolClient's.
  // Its calls do not renew the lease: call PoolClient::keepalive within the idle timeout.
  SandboxClient client(ClientOptions options = {}) const {
    return SandboxClient(SandboxEndpoints{.vsock_path = vsock_path, .api_socket_path = {}},
                         options);
  }
};

// A warm image and its limits (PUT /images/{name}).
struct PoolImage {
  // Its directory's name in the daemon's image store (`dsec-vmm warm --out IMAGE_DIR/NAME`):
  // 1 to 64 letters, digits, '.', '_', '-', beginning with a letter or digit, without "..".
  std::string name{};
  uint32_t ready = 0;           // clones kept restored ahead of demand
  uint32_t max = 0;             // clones at most, ready and in use together; 0: max(ready, 1)
  std::chrono::seconds ttl{0};  // an acquired sandbox's time to live; 0: none
  std::chrono::seconds idle_timeout{0};  // stopped after this long without a request; 0: never
};

// A registered image with its sandboxes (GET /images).
struct PoolImageStatus {
  PoolImage image{};
  uint64_t guest_memory_bytes = 0;  // its snapshot's memory file
  uint32_t starting = 0;
  uint32_t ready = 0;
  uint32_t in_use = 0;
  uint32_t stopping = 0;
};

// POST /sandboxes. An option left out takes the image's; 0 means none (never).
struct AcquireOptions {
  std::string image{};
  std::optional<std::chrono::seconds> ttl = std::nullopt;
  std::optional<std::chrono::seconds> idle_timeout = std::nullopt;
};

struct PoolClientOptions {
  // Bounds each request, from connect to the whole answer. The daemon answers one request
  // at a time: an acquire that restores a clone on the spot (up to three tries of its
  // --ready-timeout) waits for it, and so does every request behind it.
  std::chrono::milliseconds request_timeout{300000};
};

// Every error is ErrorCode::kPool but for arguments refused before any request
// (kInvalidArgument). A refusal carries the daemon's HTTP status (Error::http_status) and
// its fault_message in the message: 404 an unknown image or id, 409 not acquired (or a
// snapshot's name taken), 410 gone (released, time to live, idle timeout,
// lost: with how it ended), 429 the image or the host is full (or the caller's quota),
// 503 no clone came up, 403 a uid the daemon does not allow (--allow-uid), or a call that
// is the operator's (register_image, snapshot). Over the Unix socket the caller is its
// uid: another uid's sandboxes answer 404. The daemon's TCP port, which takes a bearer
// token, is not this client's (docs/pool.md, "Tenants and authentication").
// No daemon on the socket: http_status 0, and the hint says how to start one.
class DSEC_SDK_API PoolClient {
 public:
  explicit PoolClient(std::string socket_path, PoolClientOptions options = {});

  // Registers `image`, or changes the limits of one of that name; the image as the daemon
  // now has it.
  Result<PoolImage> register_image(const PoolImage& image) const;
  Result<std::vector<PoolImageStatus>> images() const;

  // A sandbox of a registered image, in use until released (or its lease ends).
  Result<PoolSandbox> acquire(const AcquireOptions& options) const;
  // Stops the sandbox; its id answers 410 afterwards.
  Status release(const std::string& id) const;
  // Renews an acquired sandbox's idle timeout (sandbox() does too).
  Status keepalive(const std::string& id) const;
  // Stops or restarts an acquired sandbox's vCPUs; the sandbox as it is now. While paused,
  // it keeps its lease, the daemon's health checks spare it, and exec and files through
  // the daemon are refused (409); an exec straight to its vsock socket waits.
  Result<PoolSandbox> pause(const std::string& id) const;
  Result<PoolSandbox> resume(const std::string& id) const;
  // Writes the sandbox's snapshot into the daemon's image store as the new image `name` (409
  // when it exists; 429 past the store's limits): a fork of the sandbox as it is now, that
  // register_image takes. A running sandbox is paused for it and resumed after. A failed
  // snapshot leaves nothing in the store.
  Status snapshot(const std::string& id, const std::string& name) const;
  Result<PoolSandbox> sandbox(const std::string& id) const;
  Result<std::vector<PoolSandbox>> sandboxes() const;

  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  PoolClientOptions options_;
};

}  // namespace dsec::sdk

// The pool API's request bodies (docs/pool.md), read strictly: every field of the type it
// must have, within its bounds, and no field the API does not know. Each error message
// names the field and says what it must be; the API answers it as a 400.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"
#include "vmm/http/message.h"
#include "vmm/network/clone_rate_limits.h"
#include "vmm/network/egress_policy.h"

namespace dsec::pool {

// A warm image and its limits: PUT /images/{name}, and the daemon's images.json. The image
// is the image store's directory of that name (image_store.h).
struct ImageSpec {
  std::string name;
  uint32_t ready = 0;  // ready clones kept restored
  uint32_t max = 1;    // clones at most, ready and in use together
  uint64_t ttl_s = 0;  // an acquired sandbox's time to live; 0: none
  // An acquired sandbox no request named for this long is stopped: its client went away
  // (docs/pool.md, "Leases"); 0: never.
  uint64_t idle_timeout_s = 0;
  // Where its clones' guests may send packets (docs/network.md), for an image with a
  // network: none by default. Its deny and reserved_allow lists hold for every clone.
  network::EgressPolicy egress{};
  // What each clone's network device lets through each way (docs/network.md, "Rate
  // limits"): none by default.
  network::CloneRateLimits net_rate_limits{};
  bool operator==(const ImageSpec&) const = default;
};

// POST /sandboxes.
struct AcquireRequest {
  std::string image;
  std::optional<uint64_t> ttl_s = std::nullopt;                // overrides the image's
  std::optional<uint64_t> idle_timeout_s = std::nullopt;       // overrides the image's
  std::optional<network::EgressPolicy> egress = std::nullopt;  // caller_egress()
};

// The egress a caller asked for (POST /sandboxes, PATCH /sandboxes/{id}/network) on a clone
// of an image whose policy is `image`: the caller's mode and allow list replace the
// image's; the image's deny list stays, the caller's added to it, and so does its
// reserved_allow (a caller names no reserved destination); the caller's resolver replaces
// the image's, which stays when the caller names none. Fails when the deny lists
// together pass kMaxEgressRules.
Result<network::EgressPolicy> caller_egress(const network::EgressPolicy& image,
                                            const network::EgressPolicy& caller);

// POST /sandboxes/{id}/ports: {"guest_port": 1..65535}.
Result<uint16_t> parse_port_forward(std::string_view body);

// PATCH /sandboxes/{id}/network: {"mode", "allow"?, "deny"?}, as an image's "egress".
Result<network::EgressPolicy> parse_network_patch(std::string_view body);

// POST /sandboxes/{id}/exec.
struct ExecCall {
  agent::ExecRequest request;
  std::string stdin_data;  // sent, then closed, when request.stdin_open
  // The HTTP client it runs for: once that client is gone, the exec ends (its agent
  // connection shut, so the guest's agent kills the command). Null: it runs to its end.
  std::shared_ptr<http::ClientPresence> client;
};

// PUT and GET /sandboxes/{id}/files: the guest's file, from the X-Dsec-Path header, and
// for a PUT its permission bits, from X-Dsec-Mode (octal; 0644 when absent).
struct FileTarget {
  std::string guest_path;
  uint32_t mode = 0644;
};
inline constexpr std::string_view kPathHeader = "x-dsec-path";
inline constexpr std::string_view kModeHeader = "x-dsec-mode";
Result<FileTarget> parse_file_target(std::string_view path, std::string_view mode);

// POST /sandboxes/{id}/snapshot: {"name": "fork"}, the new image's name in the store. A
// 'snapshot_dir' is refused, saying so.
Result<std::string> parse_snapshot_name(std::string_view body);

// What a name (an image's, a sandbox's id) may hold: it becomes part of file names.
Status check_name(std::string_view name, std::string_view what);

// `name` from the path; `body` the request's (a 'snapshot_dir' in it is refused, saying where
// images go instead).
Result<ImageSpec> parse_image_spec(std::string_view name, std::string_view body);
nlohmann::json image_spec_json(const ImageSpec& spec);
// An image as images.json keeps it (with its name inside).
Result<ImageSpec> image_spec_from_json(const nlohmann::json& value);

Result<AcquireRequest> parse_acquire(std::string_view body);
Result<ExecCall> parse_exec(std::string_view body);

// Bounds that keep one request from asking the daemon for unbounded work.
inline constexpr uint32_t kMaxClonesPerImage = 4096;
inline constexpr uint64_t kMaxTtlSeconds = uint64_t{7} * 24 * 3600;
inline constexpr uint32_t kMaxExecTimeoutMs = 600'000;
inline constexpr size_t kMaxExecArgs = 4096;

}  // namespace dsec::pool

// What the pool daemon keeps in its state directory, so that a daemon started again after
// a crash finds its images and its sandboxes (docs/pool.md):
//   DIR/images.json          the registered images and their limits
//   DIR/sandboxes/ID.json    one record per sandbox: its VMM's identity, files and state
//   DIR/sandboxes/ID/        the sandbox's own directory (sandbox_dir.h): its vsock and API
//                            sockets and console;  DIR/sandboxes/ID.log its VMM's log
// Every file is written whole or not at all (AtomicFileWriter). Records are read back
// strictly: a record that does not parse is reported, never half-trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/network/egress_policy.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/process_identity.h"
#include "vmm/pool/vmm_launcher.h"

namespace dsec::pool {

enum class SandboxState { kStarting, kReady, kInUse, kStopping };
std::string_view state_name(SandboxState state);
// The state `name` (as state_name writes it) stands for.
Result<SandboxState> state_of(std::string_view name);

// A host port forwarded to a port of a sandbox's guest (POST /sandboxes/ID/ports).
struct ForwardedPort {
  uint16_t guest_port = 0;
  uint16_t host_port = 0;
  bool operator==(const ForwardedPort&) const = default;
};
// The most forwards one record holds (the host has 2768 ports to hand out in all).
inline constexpr size_t kMaxForwardedPorts = 64;

struct SandboxRecord {
  std::string id;
  std::string image;
  ProcessIdentity process;
  SandboxFiles files;
  SandboxState state = SandboxState::kStarting;
  int64_t expires_at_ms = 0;     // wall clock (ms since the epoch) at which it is stopped; 0: never
  uint64_t idle_timeout_ms = 0;  // stopped when no request named it for this long; 0: never
  bool paused = false;           // its vCPUs stopped by POST /sandboxes/ID/pause
  // The tenant that acquired it (Tenant::name); empty while it is the pool's own.
  std::string owner{};
  // Its network's slot (pool_networks.h), for a clone of an image with a network; and the
  // egress policy it has now.
  std::optional<uint32_t> network_slot{};
  network::EgressPolicy egress{};
  // Its forwarded ports, which a daemon started again forwards again where they were.
  std::vector<ForwardedPort> ports{};
  bool operator==(const SandboxRecord&) const = default;
};

std::string record_text(const SandboxRecord& record);
Result<SandboxRecord> parse_record(std::string_view text);

class StateDir {
 public:
  // Makes DIR and DIR/sandboxes (mode 0700) where missing.
  static Result<StateDir> open(std::string dir);

  const std::string& path() const { return dir_; }
  // The files a new sandbox `id` gets, and its own directory, which holds its sockets.
  SandboxFiles files_for(std::string_view id) const;
  std::string sandbox_dir(std::string_view id) const;

  Status write_record(const SandboxRecord& record) const;
  void remove_record(std::string_view id) const;
  // Every record; `unreadable` gets the paths of those that do not parse (with why).
  std::vector<SandboxRecord> read_records(std::vector<std::string>& unreadable) const;

  Status write_images(const std::vector<ImageSpec>& images) const;
  // None when there is no images.json.
  Result<std::vector<ImageSpec>> read_images() const;

  // Removes images.json and the sandboxes directory if it is empty: a clean shutdown.
  void remove_own_files() const;

 private:
  explicit StateDir(std::string dir) : dir_(std::move(dir)) {}
  std::string sandboxes_dir() const { return dir_ + "/sandboxes"; }
  std::string dir_;
};

}  // namespace dsec::pool

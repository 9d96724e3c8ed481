// A sandbox run by the embedding process: one dsec-vmm process per sandbox (no VM runs in
// the caller's process), started from a kernel and initramfs (boot) or a snapshot
// (restore), with its sockets, console and log in a private runtime directory. The
// Sandbox owns that process and that directory: destroying it stops the VMM and removes
// the directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dsec/error.h"
#include "dsec/sandbox_client.h"

namespace dsec::sdk {

namespace detail {
struct SandboxState;
}

// How the library starts a VMM, for boots and restores alike.
struct LaunchOptions {
  // The dsec-vmm binary. Empty: the one installed with this library, else `dsec-vmm` in
  // PATH.
  std::string vmm_binary{};
  // Where each sandbox's runtime directory is made. Empty: $XDG_RUNTIME_DIR, else /tmp.
  // Unix sockets live there: it must be a local file system (not 9p or NFS), and its path
  // short (a socket's path has at most 107 bytes).
  std::string runtime_parent{};
  // The VMM's seccomp filters: "on", "log" or "off" (dsec-vmm --seccomp).
  std::string seccomp = "on";
  // The guest's serial console goes to this file. Empty: console.log in the runtime
  // directory (gone with the sandbox).
  std::string console_path{};
  // How long the guest agent (and, for a restore, the clone's entropy and clock) has to be
  // ready before boot or restore gives up and stops the VMM.
  std::chrono::milliseconds ready_timeout{60000};
  ClientOptions client{};
};

struct BootOptions {
  // The kernel and initramfs. Empty: the default image that dsec-vmm finds itself
  // ($DSEC_IMAGE_DIR, else ~/.cache/dsec-vmm/default).
  std::string kernel{};
  std::string initrd{};
  uint32_t vcpus = 1;
  uint32_t memory_mib = 128;
  bool rng = true;                    // a virtio-rng device
  std::vector<std::string> drives{};  // dsec-vmm --drive specs: PATH[,ro][,id=ID]
  std::vector<std::string> append{};  // words added to the kernel command line (dsec.agent is)
  LaunchOptions launch{};
};

struct RestoreOptions {
  std::string snapshot_dir{};  // written by SandboxClient::snapshot or `dsec-vmm warm`
  LaunchOptions launch{};
};

class DSEC_SDK_API Sandbox {
 public:
  // Boots a guest and returns once its agent answers.
  static Result<Sandbox> boot(const BootOptions& options);
  // Starts a copy-on-write clone of a snapshot and returns once its agent has its fresh
  // entropy and clock and answers.
  static Result<Sandbox> restore(const RestoreOptions& options);

  // A moved-from Sandbox may only be assigned to or destroyed.
  Sandbox(Sandbox&&) noexcept;
  Sandbox& operator=(Sandbox&&) noexcept;
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  // Stops the VMM (as stop() does, with a grace of 5 s) and removes the runtime directory.
  ~Sandbox();

  const SandboxClient& client() const;

  // Stops the VMM: SIGTERM, then SIGKILL if it has not ended within `grace`. Returns its
  // exit status (docs/architecture.md#lifecycle-and-exits; 128+N if signal N ended it).
  // The runtime directory stays until the Sandbox goes.
  Result<int> stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Whether the VMM process still runs.
  bool running() const;
  pid_t vmm_pid() const;
  const std::string& runtime_dir() const;
  // The last lines of the VMM's own log (its stderr), for a report.
  std::string vmm_log_tail(size_t max_lines = 20) const;

 private:
  explicit Sandbox(std::unique_ptr<detail::SandboxState> state);
  std::unique_ptr<detail::SandboxState> state_;
};

}  // namespace dsec::sdk

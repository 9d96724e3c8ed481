// Talking to a running sandbox: commands and files through its guest agent (vsock), pause,
// resume and snapshots through its VMM's API socket. A SandboxClient owns nothing: a
// Sandbox (sandbox.h) hands one out for the VMM it runs, and a client of another
// supervisor (a pool) can be made from that sandbox's two sockets.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dsec/error.h"

namespace dsec::sdk {

// The two sockets of a running sandbox's VMM.
struct SandboxEndpoints {
  std::string vsock_path{};       // its --vsock: the guest agent behind it
  std::string api_socket_path{};  // its --api-sock
};

struct ExecRequest {
  std::vector<std::string> argv{};  // the command and its arguments; argv[0] is looked up in PATH
  std::vector<std::string> env{};   // NAME=value, added to the agent's environment
  std::string cwd{};                // working directory in the guest; empty: /
  std::chrono::milliseconds timeout{0};  // the guest kills the command's group after it; 0: none
  std::string stdin_data{};              // sent to the command's stdin, which is then closed
  bool stdin_open = false;               // give the command stdin_data (otherwise /dev/null)
};

// How a command ended.
struct ExitStatus {
  enum class Kind { kExited, kSignaled, kTimedOut };
  Kind kind = Kind::kExited;
  int code = 0;  // the exit code, or the signal's number
  // Exited with status 0.
  bool success() const { return kind == Kind::kExited && code == 0; }
};

struct ExecResult {
  ExitStatus status{};
  std::string stdout_data{};
  std::string stderr_data{};
};

// Receives a command's output as it comes.
using OutputSink = std::function<void(std::string_view)>;

struct ClientOptions {
  // How long the guest has to answer at each step of a request (connect, each frame); an
  // exec's command may stay silent longer while the agent answers health checks.
  std::chrono::milliseconds answer_timeout{30000};
  // How long the VMM has to answer each API request (a snapshot writes all guest memory).
  std::chrono::milliseconds api_timeout{300000};
};

class DSEC_SDK_API SandboxClient {
 public:
  explicit SandboxClient(SandboxEndpoints endpoints, ClientOptions options = {});

  // Runs a command and collects its output; more than `max_output_bytes` of stdout and
  // stderr together fails the exec (ErrorCode::kOutputLimit) and stops the command's stream.
  Result<ExecResult> exec(const ExecRequest& request,
                          size_t max_output_bytes = size_t{16} << 20) const;
  // Runs a command, streaming its output to the sinks as it comes.
  Result<ExitStatus> exec(const ExecRequest& request, const OutputSink& on_stdout,
                          const OutputSink& on_stderr) const;

  // Copies the regular file `host_path` into the guest as `guest_path` (absolute), with its
  // permission bits.
  Status copy_in(const std::string& host_path, const std::string& guest_path) const;
  // Copies `guest_path` out of the guest to `host_path`: it lands whole or not at all, with
  // the guest's permission bits less the process's umask (never setuid, setgid or sticky).
  // Returns its size.
  Result<uint64_t> copy_out(const std::string& guest_path, const std::string& host_path) const;

  // Pauses and resumes the guest's vCPUs (PATCH /vm).
  Status pause() const;
  Status resume() const;
  // Writes a snapshot of the VM into `dir` (created if missing: `state` and `memory`), the
  // directory Sandbox::restore starts clones of. The VM is paused for it and resumed after,
  // unless `stay_paused`.
  Status snapshot(const std::string& dir, bool stay_paused = false) const;

  const SandboxEndpoints& endpoints() const { return endpoints_; }

 private:
  SandboxEndpoints endpoints_;
  ClientOptions options_;
};

}  // namespace dsec::sdk

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

// A process the sandbox's agent keeps past the call that started it (a server, a shell):
// its output waits in the guest, 1 MiB a stream, until read (attach_process).
struct ProcessRequest {
  std::vector<std::string> argv{};  // the program and its arguments; argv[0] is looked up in PATH
  std::vector<std::string> env{};   // NAME=value, added to the agent's environment
  std::string cwd{};                // working directory in the guest; empty: the user's home, or /
  std::string tag{};                // free text to find it by in list_processes()
  std::string user{};               // a user of the guest's image (`user`); empty: root
  bool stdin_open = false;          // a stdin to write with send_process_input()
  bool terminal = false;            // a pseudo-terminal of rows x cols for all three streams
  uint16_t rows = 24;
  uint16_t cols = 80;
};

struct ProcessInfo {
  uint32_t pid = 0;
  std::string tag{};
  std::vector<std::string> argv{};  // as started, cut to 2 KiB in all
  bool running = true;
  ExitStatus exit{};  // when not running
  bool terminal = false;
  // Output dropped, for room, before anyone read it.
  uint64_t stdout_dropped = 0;
  uint64_t stderr_dropped = 0;
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

  // Kept processes (docs/agent-protocol.md, "Processes"): each call is a request of its own,
  // and a process outlives the call (and the client) that started it. Starts one; its pid.
  Result<uint32_t> start_process(const ProcessRequest& request) const;
  // Streams its output from the first byte no one has read, then live, until it ends; its
  // exit. The process runs on when this fails (a broken connection).
  Result<ExitStatus> attach_process(uint32_t pid, const OutputSink& on_stdout,
                                    const OutputSink& on_stderr) const;
  Result<std::vector<ProcessInfo>> list_processes() const;
  Status send_process_input(uint32_t pid, std::string_view data) const;
  Status close_process_stdin(uint32_t pid) const;
  // Sends `signal` to its process group.
  Status signal_process(uint32_t pid, int signal) const;
  Status resize_terminal(uint32_t pid, uint16_t rows, uint16_t cols) const;

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

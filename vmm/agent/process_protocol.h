// The agent protocol's process messages (docs/agent-protocol.md, "Processes"): processes
// that the agent keeps past the connection that started them, with their output held in a
// bounded buffer until read. Bounds are checked before anything is allocated, as for every
// other message: the agent decodes the host's bytes, the host the guest's.
//
// Dependency-free beyond vmm/common/error.h: the guest agent compiles it too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"

namespace dsec::agent {

// How many processes the agent keeps at once, running or finished and not yet reaped.
inline constexpr size_t kMaxProcesses = 64;
inline constexpr size_t kMaxTagLen = 256;
inline constexpr size_t kMaxUserLen = 32;
// What a process-list reply reports of each argv: the argv as started, cut to this many
// bytes in all (later strings dropped, the last one shortened), so that a whole list fits
// in one frame whatever the processes were started with.
inline constexpr size_t kMaxListedArgvBytes = 2048;
// The largest signal number a process-signal may carry (SIGRTMAX on Linux).
inline constexpr int32_t kMaxSignal = 64;
// A terminal's size, in characters.
inline constexpr uint16_t kMaxTerminalSide = 4096;

struct ProcessStartRequest {
  std::vector<std::string> argv;  // argv[0] is the program, looked up in PATH
  std::vector<std::string> env;   // "NAME=value" each
  std::string cwd;                // empty: the user's home, or "/"
  std::string tag;                // free text for the host to find the process by; may be empty
  std::string user;               // a user name from the guest's /etc/passwd; empty: the agent's
  bool stdin_open = false;        // a pipe the host writes with process-input; else /dev/null
  bool pty = false;               // a terminal: stdin, stdout and stderr are its one side
  uint16_t rows = 24;             // the terminal's size, when pty
  uint16_t cols = 80;

  bool operator==(const ProcessStartRequest&) const = default;
};

// A process by its pid: process-started's answer, process-attach, process-close-stdin.
struct ProcessRef {
  uint32_t pid = 0;

  bool operator==(const ProcessRef&) const = default;
};

struct ProcessInput {
  uint32_t pid = 0;
  std::vector<uint8_t> data;  // at most kMaxChunk bytes

  bool operator==(const ProcessInput&) const = default;
};

// Sent to the process's whole group (each process leads a session of its own).
struct ProcessSignal {
  uint32_t pid = 0;
  int32_t signal = 0;  // 1..kMaxSignal

  bool operator==(const ProcessSignal&) const = default;
};

// A new size for a process's terminal.
struct ProcessResize {
  uint32_t pid = 0;
  uint16_t rows = 0;  // 1..kMaxTerminalSide each
  uint16_t cols = 0;

  bool operator==(const ProcessResize&) const = default;
};

struct ProcessEntry {
  uint32_t pid = 0;
  std::string tag;
  std::vector<std::string> argv;  // at most kMaxListedArgvBytes of it
  bool running = true;
  ExitStatus exit;  // when not running
  bool pty = false;
  // Output the process wrote that no one read before the buffer dropped it.
  uint64_t stdout_dropped = 0;
  uint64_t stderr_dropped = 0;

  bool operator==(const ProcessEntry&) const = default;
};

struct ProcessListReply {
  std::vector<ProcessEntry> processes;  // at most kMaxProcesses

  bool operator==(const ProcessListReply&) const = default;
};

// argv cut to kMaxListedArgvBytes, as a list reports it.
std::vector<std::string> listed_argv(const std::vector<std::string>& argv);

std::vector<uint8_t> encode(const ProcessStartRequest& m);
std::vector<uint8_t> encode(const ProcessRef& m);
std::vector<uint8_t> encode(const ProcessInput& m);
std::vector<uint8_t> encode(const ProcessSignal& m);
std::vector<uint8_t> encode(const ProcessResize& m);
std::vector<uint8_t> encode(const ProcessListReply& m);

Result<ProcessStartRequest> decode_process_start_request(std::span<const uint8_t> payload);
Result<ProcessRef> decode_process_ref(std::span<const uint8_t> payload);
Result<ProcessInput> decode_process_input(std::span<const uint8_t> payload);
Result<ProcessSignal> decode_process_signal(std::span<const uint8_t> payload);
Result<ProcessResize> decode_process_resize(std::span<const uint8_t> payload);
Result<ProcessListReply> decode_process_list_reply(std::span<const uint8_t> payload);

}  // namespace dsec::agent

// The host <-> guest agent protocol (docs/agent-protocol.md): frames over a vsock stream,
// and the messages they carry. Both sides decode what the other sent as hostile input:
// frame sizes, counts and string lengths are bounded and checked before use, and a
// malformed frame ends the connection with an Error naming what was wrong.
//
// Dependency-free beyond vmm/common/error.h: the guest agent compiles it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::agent {

// What the agent's health-ok reports: 2 added the process messages, 3 the file system's.
inline constexpr const char* kAgentVersion = "dsec-agent 3";
// The vsock port the agent listens on in the guest.
inline constexpr uint32_t kAgentPort = 1024;
inline constexpr uint32_t kFrameMagic = 0x47415344;  // "DSAG", little-endian on the wire
inline constexpr size_t kFrameHeaderSize = 16;
// The largest payload either side accepts; data moves in chunks of at most kMaxChunk.
inline constexpr uint32_t kMaxPayload = 256 * 1024;
inline constexpr uint32_t kMaxChunk = 64 * 1024;
// Bounds on what an exec request may carry.
inline constexpr size_t kMaxArgs = 4096;
inline constexpr size_t kMaxEnv = 4096;
inline constexpr size_t kMaxStringLen = size_t{64} * 1024;
inline constexpr size_t kMaxPathLen = 4096;

enum class MessageType : uint16_t {
  // host -> guest
  kHealth = 0x0001,      // empty; answered kHealthOk
  kExec = 0x0002,        // ExecRequest; answered kStdout/kStderr..., then kExit or kError
  kStdin = 0x0003,       // raw bytes for the running command's stdin
  kStdinClose = 0x0004,  // empty: end of stdin
  kWriteFile = 0x0005,   // WriteFileRequest, then kFileData..., kFileEnd; answered kOk or kError
  kReadFile = 0x0006,    // ReadFileRequest; answered kFileInfo, kFileData..., kFileEnd, or kError
  kCloneSync = 0x0007,   // CloneSyncRequest; answered kOk or kError
  // Processes kept by the agent past their connection (vmm/agent/process_protocol.h).
  kProcessStart = 0x0020,       // ProcessStartRequest; answered kProcessStarted or kError
  kProcessAttach = 0x0021,      // ProcessRef; answered kStdout/kStderr..., then kExit, or kError
  kProcessList = 0x0022,        // empty; answered kProcessListReply
  kProcessInput = 0x0023,       // ProcessInput; answered kOk or kError
  kProcessCloseStdin = 0x0024,  // ProcessRef; answered kOk or kError
  kProcessSignal = 0x0025,      // ProcessSignal; answered kOk or kError
  kProcessResize = 0x0026,      // ProcessResize; answered kOk or kError
  // The file system (vmm/agent/fs_protocol.h).
  kFsStat = 0x0030,    // FsPath; answered kFsStatReply or kError
  kFsList = 0x0031,    // FsListRequest; answered kFsEntries..., then kOk or kError
  kFsMkdir = 0x0032,   // FsPath; answered kFsMade or kError
  kFsMove = 0x0033,    // FsMoveRequest; answered kOk or kError
  kFsRemove = 0x0034,  // FsPath; answered kOk or kError
  kFsWatch = 0x0035,   // FsWatchRequest; answered kOk, then kFsEvent... until the host closes
  // both directions
  kFileData = 0x0010,  // raw bytes, at most kMaxChunk
  kFileEnd = 0x0011,   // empty
  // guest -> host
  kHealthOk = 0x0081,          // HealthReply
  kStdout = 0x0082,            // raw bytes
  kStderr = 0x0083,            // raw bytes
  kExit = 0x0084,              // ExitStatus
  kError = 0x0085,             // ErrorReply
  kOk = 0x0086,                // empty
  kFileInfo = 0x0087,          // FileInfo
  kProcessStarted = 0x0088,    // ProcessRef: the new process's pid
  kProcessListReply = 0x0089,  // ProcessListReply
  kFsStatReply = 0x008A,       // FsEntry
  kFsEntries = 0x008B,         // FsEntries
  kFsMade = 0x008C,            // FsMade
  kFsEvent = 0x008D,           // FsEvent
};

// The type's name for messages ("exec"), or nullopt if the value is no known type.
std::optional<const char*> message_type_name(uint16_t type);

struct Frame {
  MessageType type{};
  uint32_t request_id = 0;
  std::vector<uint8_t> payload;

  bool operator==(const Frame&) const = default;
};

// Header then payload: magic u32, type u16, flags u16 (0), request id u32, payload length u32.
std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id,
                                  std::span<const uint8_t> payload);

// Splits a byte stream into frames. feed() appends what was received; next() returns the
// next whole frame, nullopt until one is whole, or an Error for a bad header (wrong magic,
// unknown type, flags set, payload over kMaxPayload). After an Error the stream is out of
// step and the connection must be closed; next() keeps returning the Error.
class FrameDecoder {
 public:
  void feed(std::span<const uint8_t> bytes);
  Result<std::optional<Frame>> next();
  // Bytes received but not yet returned in a frame.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  std::vector<uint8_t> buffer_;
  size_t consumed_ = 0;
  std::optional<Error> error_;
};

struct ExecRequest {
  std::vector<std::string> argv;  // argv[0] is the program, looked up in PATH
  std::vector<std::string> env;   // "NAME=value" each; added to the agent's environment
  std::string cwd;                // empty: "/"
  uint32_t timeout_ms = 0;        // 0: none
  bool stdin_open = false;        // kStdin frames follow; otherwise stdin is /dev/null

  bool operator==(const ExecRequest&) const = default;
};

struct ExitStatus {
  enum class Kind : uint8_t { kExited = 0, kSignaled = 1, kTimedOut = 2 };
  Kind kind = Kind::kExited;
  int32_t code = 0;  // the exit code, or the signal number

  bool operator==(const ExitStatus&) const = default;
};

struct WriteFileRequest {
  std::string path;  // absolute
  uint32_t mode = 0644;
  uint64_t size = 0;  // exactly this many bytes of kFileData follow

  bool operator==(const WriteFileRequest&) const = default;
};

struct ReadFileRequest {
  std::string path;  // absolute

  bool operator==(const ReadFileRequest&) const = default;
};

struct FileInfo {
  uint64_t size = 0;
  uint32_t mode = 0;

  bool operator==(const FileInfo&) const = default;
};

// Sent by the host to a restored clone before anything else runs in it: fresh entropy for
// the guest kernel's RNG (which the snapshot's guest had, as every clone of it has) and the
// host's wall clock (which stood still in the snapshot).
struct CloneSyncRequest {
  static constexpr size_t kMinEntropy = 32;
  static constexpr size_t kMaxEntropy = 512;
  std::vector<uint8_t> entropy;  // kMinEntropy..kMaxEntropy bytes from the host's getrandom()
  uint64_t realtime_ns = 0;      // the host's CLOCK_REALTIME when sent

  bool operator==(const CloneSyncRequest&) const = default;
};

struct HealthReply {
  std::string agent_version;
  uint64_t uptime_ms = 0;

  bool operator==(const HealthReply&) const = default;
};

struct ErrorReply {
  std::string message;

  bool operator==(const ErrorReply&) const = default;
};

std::vector<uint8_t> encode(const ExecRequest& m);
std::vector<uint8_t> encode(const ExitStatus& m);
std::vector<uint8_t> encode(const WriteFileRequest& m);
std::vector<uint8_t> encode(const ReadFileRequest& m);
std::vector<uint8_t> encode(const FileInfo& m);
std::vector<uint8_t> encode(const HealthReply& m);
std::vector<uint8_t> encode(const CloneSyncRequest& m);
std::vector<uint8_t> encode(const ErrorReply& m);

// Checks shared by the decoders: an absolute path; "NAME=value" environment entries.
Status check_path(const std::string& path, const char* what);
Status check_env(const std::vector<std::string>& env, const char* what);

// Each checks every bound and that the payload is consumed exactly.
Result<ExecRequest> decode_exec_request(std::span<const uint8_t> payload);
Result<ExitStatus> decode_exit_status(std::span<const uint8_t> payload);
Result<WriteFileRequest> decode_write_file_request(std::span<const uint8_t> payload);
Result<ReadFileRequest> decode_read_file_request(std::span<const uint8_t> payload);
Result<FileInfo> decode_file_info(std::span<const uint8_t> payload);
Result<HealthReply> decode_health_reply(std::span<const uint8_t> payload);
Result<CloneSyncRequest> decode_clone_sync_request(std::span<const uint8_t> payload);
Result<ErrorReply> decode_error_reply(std::span<const uint8_t> payload);

}  // namespace dsec::agent

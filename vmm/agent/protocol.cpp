#include "vmm/agent/protocol.h"

#include <algorithm>

#include "vmm/agent/wire.h"

namespace dsec::agent {
Status check_path(const std::string& path, const char* what) {
  if (path.empty() || path.front() != '/') {
    return fail(std::string(what) + ": the path '" + path + "' is not absolute");
  }
  return ok();
}

Status check_env(const std::vector<std::string>& env, const char* what) {
  for (const auto& e : env) {
    if (e.find('=') == std::string::npos || e.front() == '=') {
      return fail(std::string(what) + ": the environment entry '" + e + "' is not NAME=value");
    }
  }
  return ok();
}

std::optional<const char*> message_type_name(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHealth:
      return "health";
    case MessageType::kExec:
      return "exec";
    case MessageType::kStdin:
      return "stdin";
    case MessageType::kStdinClose:
      return "stdin-close";
    case MessageType::kWriteFile:
      return "write-file";
    case MessageType::kCloneSync:
      return "clone-sync";
    case MessageType::kReadFile:
      return "read-file";
    case MessageType::kProcessStart:
      return "process-start";
    case MessageType::kProcessAttach:
      return "process-attach";
    case MessageType::kProcessList:
      return "process-list";
    case MessageType::kProcessInput:
      return "process-input";
    case MessageType::kProcessCloseStdin:
      return "process-close-stdin";
    case MessageType::kProcessSignal:
      return "process-signal";
    case MessageType::kProcessResize:
      return "process-resize";
    case MessageType::kFsStat:
      return "fs-stat";
    case MessageType::kFsList:
      return "fs-list";
    case MessageType::kFsMkdir:
      return "fs-mkdir";
    case MessageType::kFsMove:
      return "fs-move";
    case MessageType::kFsRemove:
      return "fs-remove";
    case MessageType::kFsWatch:
      return "fs-watch";
    case MessageType::kFileData:
      return "file-data";
    case MessageType::kFileEnd:
      return "file-end";
    case MessageType::kHealthOk:
      return "health-ok";
    case MessageType::kStdout:
      return "stdout";
    case MessageType::kStderr:
      return "stderr";
    case MessageType::kExit:
      return "exit";
    case MessageType::kError:
      return "error";
    case MessageType::kOk:
      return "ok";
    case MessageType::kFileInfo:
      return "file-info";
    case MessageType::kProcessStarted:
      return "process-started";
    case MessageType::kProcessListReply:
      return "process-list-reply";
    case MessageType::kFsStatReply:
      return "fs-stat-reply";
    case MessageType::kFsEntries:
      return "fs-entries";
    case MessageType::kFsMade:
      return "fs-made";
    case MessageType::kFsEvent:
      return "fs-event";
  }
  return std::nullopt;
}

std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id,
                                  std::span<const uint8_t> payload) {
  WireWriter w;
  w.u32(kFrameMagic);
  const auto t = static_cast<uint16_t>(type);
  w.u8(static_cast<uint8_t>(t));
  w.u8(static_cast<uint8_t>(t >> 8));
  w.u8(0);  // flags
  w.u8(0);
  w.u32(request_id);
  w.u32(static_cast<uint32_t>(payload.size()));
  w.raw(payload);
  return w.take();
}

void FrameDecoder::feed(std::span<const uint8_t> bytes) {
  if (error_) {
    return;
  }
  // Drop what earlier frames used before growing, so the buffer stays about one frame.
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > kMaxPayload) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

Result<std::optional<Frame>> FrameDecoder::next() {
  if (error_) {
    return std::unexpected(*error_);
  }
  const std::span<const uint8_t> pending(buffer_.data() + consumed_, buffer_.size() - consumed_);
  if (pending.size() < kFrameHeaderSize) {
    return std::nullopt;
  }
  WireReader r(pending.first(kFrameHeaderSize), "frame header");
  const uint32_t magic = r.u32().value();
  const uint8_t type_lo = r.u8().value();
  const uint8_t type_hi = r.u8().value();
  const uint16_t type = static_cast<uint16_t>(type_lo | (type_hi << 8));
  const uint8_t flags_lo = r.u8().value();
  const uint8_t flags_hi = r.u8().value();
  const uint32_t request_id = r.u32().value();
  const uint32_t length = r.u32().value();
  const auto type_name = message_type_name(type);
  std::string bad;
  if (magic != kFrameMagic) {
    bad = "bad magic";
  } else if (!type_name) {
    bad = "unknown message type " + std::to_string(type);
  } else if (flags_lo != 0 || flags_hi != 0) {
    bad = "flags set on a " + std::string(*type_name) + " frame";
  } else if (length > kMaxPayload) {
    bad = "a payload of " + std::to_string(length) + " bytes, over the limit of " +
          std::to_string(kMaxPayload);
  }
  if (!bad.empty()) {
    error_ = Error("agent protocol: " + bad + "; the connection is out of step", 0,
                   "the peer speaks another protocol or version; close the connection");
    return std::unexpected(*error_);
  }
  if (pending.size() - kFrameHeaderSize < length) {
    return std::nullopt;
  }
  Frame frame;
  frame.type = static_cast<MessageType>(type);
  frame.request_id = request_id;
  const auto body = pending.subspan(kFrameHeaderSize, length);
  frame.payload.assign(body.begin(), body.end());
  consumed_ += kFrameHeaderSize + length;
  return frame;
}

std::vector<uint8_t> encode(const ExecRequest& m) {
  WireWriter w;
  w.strings(m.argv);
  w.strings(m.env);
  w.string(m.cwd);
  w.u32(m.timeout_ms);
  w.u8(m.stdin_open ? 1 : 0);
  return w.take();
}

Result<ExecRequest> decode_exec_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "exec request");
  ExecRequest m;
  m.argv = DSEC_TRY(r.strings(kMaxArgs, kMaxStringLen));
  m.env = DSEC_TRY(r.strings(kMaxEnv, kMaxStringLen));
  m.cwd = DSEC_TRY(r.string(kMaxPathLen));
  m.timeout_ms = DSEC_TRY(r.u32());
  const uint8_t stdin_open = DSEC_TRY(r.u8());
  DSEC_TRY(r.finish());
  if (m.argv.empty() || m.argv.front().empty()) {
    return fail("exec request: no program to run (argv is empty)");
  }
  DSEC_TRY(check_env(m.env, "exec request"));
  if (!m.cwd.empty()) {
    DSEC_TRY(check_path(m.cwd, "exec request: cwd"));
  }
  if (stdin_open > 1) {
    return fail("exec request: stdin flag " + std::to_string(stdin_open));
  }
  m.stdin_open = stdin_open == 1;
  return m;
}

std::vector<uint8_t> encode(const ExitStatus& m) {
  WireWriter w;
  w.u8(static_cast<uint8_t>(m.kind));
  w.i32(m.code);
  return w.take();
}

Result<ExitStatus> decode_exit_status(std::span<const uint8_t> payload) {
  WireReader r(payload, "exit status");
  const uint8_t kind = DSEC_TRY(r.u8());
  ExitStatus m;
  m.code = DSEC_TRY(r.i32());
  DSEC_TRY(r.finish());
  if (kind > static_cast<uint8_t>(ExitStatus::Kind::kTimedOut)) {
    return fail("exit status: unknown kind " + std::to_string(kind));
  }
  m.kind = static_cast<ExitStatus::Kind>(kind);
  return m;
}

std::vector<uint8_t> encode(const WriteFileRequest& m) {
  WireWriter w;
  w.string(m.path);
  w.u32(m.mode);
  w.u64(m.size);
  return w.take();
}

Result<WriteFileRequest> decode_write_file_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "write-file request");
  WriteFileRequest m;
  m.path = DSEC_TRY(r.string(kMaxPathLen));
  m.mode = DSEC_TRY(r.u32());
  m.size = DSEC_TRY(r.u64());
  DSEC_TRY(r.finish());
  DSEC_TRY(check_path(m.path, "write-file request"));
  if (m.mode > 07777) {
    return fail("write-file request: mode " + std::to_string(m.mode) + " has bits beyond 07777");
  }
  return m;
}

std::vector<uint8_t> encode(const ReadFileRequest& m) {
  WireWriter w;
  w.string(m.path);
  return w.take();
}

Result<ReadFileRequest> decode_read_file_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "read-file request");
  ReadFileRequest m;
  m.path = DSEC_TRY(r.string(kMaxPathLen));
  DSEC_TRY(r.finish());
  DSEC_TRY(check_path(m.path, "read-file request"));
  return m;
}

std::vector<uint8_t> encode(const FileInfo& m) {
  WireWriter w;
  w.u64(m.size);
  w.u32(m.mode);
  return w.take();
}

Result<FileInfo> decode_file_info(std::span<const uint8_t> payload) {
  WireReader r(payload, "file info");
  FileInfo m;
  m.size = DSEC_TRY(r.u64());
  m.mode = DSEC_TRY(r.u32());
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const HealthReply& m) {
  WireWriter w;
  w.string(m.agent_version);
  w.u64(m.uptime_ms);
  return w.take();
}

Result<HealthReply> decode_health_reply(std::span<const uint8_t> payload) {
  WireReader r(payload, "health reply");
  HealthReply m;
  m.agent_version = DSEC_TRY(r.string(256));
  m.uptime_ms = DSEC_TRY(r.u64());
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const CloneSyncRequest& m) {
  WireWriter w;
  w.u32(static_cast<uint32_t>(m.entropy.size()));
  w.raw(m.entropy);
  w.u64(m.realtime_ns);
  return w.take();
}

Result<CloneSyncRequest> decode_clone_sync_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "clone-sync request");
  CloneSyncRequest m;
  const uint32_t size = DSEC_TRY(r.u32());
  if (size < CloneSyncRequest::kMinEntropy || size > CloneSyncRequest::kMaxEntropy) {
    return fail("clone-sync request: " + std::to_string(size) + " bytes of entropy, not " +
                std::to_string(CloneSyncRequest::kMinEntropy) + " to " +
                std::to_string(CloneSyncRequest::kMaxEntropy));
  }
  const auto entropy = DSEC_TRY(r.take(size, "entropy"));
  m.entropy.assign(entropy.begin(), entropy.end());
  m.realtime_ns = DSEC_TRY(r.u64());
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const ErrorReply& m) {
  WireWriter w;
  w.string(m.message);
  return w.take();
}

Result<ErrorReply> decode_error_reply(std::span<const uint8_t> payload) {
  WireReader r(payload, "error reply");
  ErrorReply m;
  // A message may quote what the guest saw, NULs included: it is only ever printed.
  m.message = DSEC_TRY(r.string(kMaxStringLen, /*no_nul=*/false));
  DSEC_TRY(r.finish());
  return m;
}

}  // namespace dsec::agent

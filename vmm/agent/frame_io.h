// Frames over a stream socket, for the guest agent and the host client alike.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"

namespace dsec::agent {

// Writes all of `bytes`, retrying short writes and EINTR.
Status write_all(int fd, std::span<const uint8_t> bytes);

Status send_frame(int fd, MessageType type, uint32_t request_id, std::span<const uint8_t> payload);

// Reads frames from one connection.
class FrameReader {
 public:
  explicit FrameReader(int fd) : fd_(fd) {}
  // The next frame; nullopt at a clean end of stream (between frames); an Error for a
  // read error, a malformed frame, or a stream that ends inside a frame.
  Result<std::optional<Frame>> next();
  // For a caller that polls the fd: one read() into the buffer. False at end of stream.
  Result<bool> fill();
  // A frame already buffered, or nullopt; never reads.
  Result<std::optional<Frame>> buffered() { return decoder_.next(); }
  // Fails if the stream ended inside a frame.
  Status check_clean_end() const;

 private:
  int fd_;
  FrameDecoder decoder_;
};

}  // namespace dsec::agent

#include "vmm/agent/frame_io.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace dsec::agent {

Status write_all(int fd, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE.
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) {
      n = ::write(fd, bytes.data(), bytes.size());
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail_errno("agent connection: write", errno);
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return ok();
}

Status send_frame(int fd, MessageType type, uint32_t request_id, std::span<const uint8_t> payload) {
  return write_all(fd, encode_frame(type, request_id, payload));
}

Result<bool> FrameReader::fill() {
  std::array<uint8_t, size_t{64} * 1024> buf{};
  while (true) {
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail_errno("agent connection: read", errno);
    }
    if (n == 0) {
      return false;
    }
    decoder_.feed(std::span(buf.data(), static_cast<size_t>(n)));
    return true;
  }
}

Status FrameReader::check_clean_end() const {
  if (decoder_.buffered() != 0) {
    return fail("agent connection: the peer closed the stream inside a frame (" +
                std::to_string(decoder_.buffered()) + " bytes of it arrived)");
  }
  return ok();
}

Result<std::optional<Frame>> FrameReader::next() {
  while (true) {
    auto frame = DSEC_TRY(decoder_.next());
    if (frame) {
      return frame;
    }
    if (!DSEC_TRY(fill())) {
      DSEC_TRY(check_clean_end());
      return std::nullopt;
    }
  }
}

}  // namespace dsec::agent

#include "guest/agent/connection.h"

#include <sys/socket.h>

#include <cerrno>

namespace dsec::agent {

void Connection::queue(MessageType type, uint32_t id, std::span<const uint8_t> payload) {
  if (sent_ == out_.size()) {
    out_.clear();
    sent_ = 0;
  }
  const auto frame = encode_frame(type, id, payload);
  out_.insert(out_.end(), frame.begin(), frame.end());
}

Status Connection::flush() {
  while (sending()) {
    const ssize_t n =
        ::send(fd_.get(), out_.data() + sent_, out_.size() - sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return ok();
    }
    if (n < 0) {
      return fail_errno("agent connection: send", errno);
    }
    sent_ += static_cast<size_t>(n);
  }
  return ok();
}

void Connection::answer(MessageType type, uint32_t id, std::span<const uint8_t> payload,
                        Clock::time_point deadline) {
  queue(type, id, payload);
  state = State::kAnswering;
  deadline_ = deadline;
}

}  // namespace dsec::agent

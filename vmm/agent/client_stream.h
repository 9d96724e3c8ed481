// The host client's connection to the agent for one request (vmm/agent/client.h): frames
// sent and received, every wait bounded by the answer timeout. Internal to the client's
// files (client.cpp, process_client.cpp, fs_client.cpp).
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/agent/frame_io.h"
#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent::client_detail {

using Clock = std::chrono::steady_clock;

inline constexpr const char* kStoppedAnsweringHint =
    "the guest may be hung or overloaded: its console, and `kill -USR1` on its dsec-vmm (which "
    "logs where its vCPUs and devices stand), say more; dsec-vmm exec and cp --answer-timeout "
    "give it longer";

std::string seconds(std::chrono::milliseconds t);

// The guest's answer to a request it refused, or a frame that should not have come.
std::unexpected<Error> unexpected_frame(const Frame& f, const char* during);

// What a wait on the guest does once the answer timeout passed with nothing moving: ok() to
// wait once more, an Error to give up with.
using Stalled = std::function<Status()>;

// The Stalled of every request but an exec: give up.
Stalled give_up(const char* during, std::chrono::milliseconds timeout);

// One request's connection to the agent (a stream socket from the Connector). Every wait
// on the guest is a poll that lasts at most the answer timeout; when one runs out,
// `stalled` decides.
class Stream {
 public:
  Stream(UniqueFd fd, std::chrono::milliseconds timeout)
      : fd_(std::move(fd)), reader_(fd_.get()), timeout_(timeout) {}

  // Sends one frame; the guest must take all of it within the timeout.
  Status send(MessageType type, uint32_t id, std::span<const uint8_t> payload,
              const Stalled& stalled) {
    const std::vector<uint8_t> frame = encode_frame(type, id, payload);
    std::span<const uint8_t> left(frame);
    auto deadline = Clock::now() + timeout_;
    while (!left.empty()) {
      if (!DSEC_TRY(wait(POLLOUT, deadline))) {
        DSEC_TRY(stalled());
        deadline = Clock::now() + timeout_;
        continue;
      }
      const ssize_t n = ::send(fd_.get(), left.data(), left.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      if (n < 0) {
        return fail_errno("agent connection: write", errno);
      }
      left = left.subspan(static_cast<size_t>(n));
    }
    return ok();
  }

  // A whole frame the guest sent already, without waiting for one; nullopt if there is none
  // (or the stream broke).
  std::optional<Frame> received_already() {
    while (true) {
      Result<std::optional<Frame>> frame = reader_.buffered();
      if (!frame) {
        return std::nullopt;
      }
      if (std::optional<Frame>& whole = *frame; whole.has_value()) {
        return std::move(whole);
      }
      pollfd ready{.fd = fd_.get(), .events = POLLIN, .revents = 0};
      if (::poll(&ready, 1, 0) <= 0) {
        return std::nullopt;
      }
      auto more = reader_.fill();
      if (!more || !*more) {
        return std::nullopt;
      }
    }
  }

  // The next frame if one is whole within `wait`, else nullopt; an Error when the agent
  // closed the connection or sent a malformed frame.
  Result<std::optional<Frame>> receive_within(std::chrono::milliseconds wait, const char* during) {
    const auto deadline = Clock::now() + wait;
    while (true) {
      if (auto frame = DSEC_TRY(reader_.buffered())) {
        return frame;
      }
      if (!DSEC_TRY(this->wait(POLLIN, deadline))) {
        return std::nullopt;
      }
      if (!DSEC_TRY(reader_.fill())) {
        DSEC_TRY(reader_.check_clean_end());
        return fail(std::string("the guest agent closed the connection during the ") + during);
      }
    }
  }

  // The next frame, whole within the timeout. An Error, naming `during`, when the agent
  // closed the connection, or for a malformed frame.
  Result<Frame> receive(const char* during, const Stalled& stalled) {
    auto deadline = Clock::now() + timeout_;
    while (true) {
      if (auto frame = DSEC_TRY(reader_.buffered())) {
        return std::move(*frame);
      }
      if (!DSEC_TRY(wait(POLLIN, deadline))) {
        DSEC_TRY(stalled());
        deadline = Clock::now() + timeout_;
        continue;
      }
      if (!DSEC_TRY(reader_.fill())) {
        DSEC_TRY(reader_.check_clean_end());
        return fail(std::string("the guest agent closed the connection during the ") + during);
      }
    }
  }

 private:
  // Whether the socket became ready for `events` (or failed, which the read or write then
  // reports) before `deadline`.
  Result<bool> wait(short events, Clock::time_point deadline) {
    while (true) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        return false;
      }
      pollfd ready{.fd = fd_.get(), .events = events, .revents = 0};
      const int n = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left.count(), INT_MAX)));
      if (n > 0) {
        return true;
      }
      if (n < 0 && errno != EINTR) {
        return fail_errno("agent connection: poll", errno);
      }
    }
  }

  UniqueFd fd_;
  FrameReader reader_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dsec::agent::client_detail

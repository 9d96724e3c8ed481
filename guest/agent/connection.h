// One host connection as the agent's loop holds it (agent_loop.h): frames read as they
// arrive, answers sent without blocking the loop, and what the connection is doing.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "vmm/agent/frame_io.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State {
    kRequest,    // waiting for its first frame
    kAnswering,  // sending its answer, then closed
    kAttached,   // streaming a kept process's output until it ends
  };

  Connection(UniqueFd fd, Clock::time_point deadline)
      : fd_(std::move(fd)), reader_(fd_.get()), deadline_(deadline) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_.get(); }
  UniqueFd take_fd() { return std::move(fd_); }
  FrameReader& reader() { return reader_; }

  // Queues a frame; flush() sends what the socket takes now.
  void queue(MessageType type, uint32_t id, std::span<const uint8_t> payload);
  // Sends what it can without blocking; an Error when the host went away.
  Status flush();
  bool sending() const { return sent_ < out_.size(); }

  // Answers and closes once sent, within `deadline`.
  void answer(MessageType type, uint32_t id, std::span<const uint8_t> payload,
              Clock::time_point deadline);

  State state = State::kRequest;
  bool closed = false;
  // When attached: the request, the process, and its place in each of its outputs.
  uint32_t request_id = 0;
  pid_t pid = -1;
  uint64_t stdout_at = 0;
  uint64_t stderr_at = 0;

  // The deadline of its first frame, or of its answer; none while attached.
  Clock::time_point deadline() const { return deadline_; }

 private:
  UniqueFd fd_;
  FrameReader reader_;
  Clock::time_point deadline_;
  std::vector<uint8_t> out_;
  size_t sent_ = 0;
};

}  // namespace dsec::agent

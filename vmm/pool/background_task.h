// Work that blocks (an exec through a sandbox's agent) run on a thread of its own, so that
// the daemon's event loop goes on serving; its completion runs on the loop's thread. The
// thread tells the loop through an eventfd the loop watches.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/io/event_loop.h"

namespace dsec::pool {

class BackgroundTask {
 public:
  using Work = std::move_only_function<void()>;
  using Done = std::move_only_function<void()>;

  // Runs `work` on a new thread; `done` on the loop's thread once it returned, unless the
  // task was destroyed first.
  static Result<std::unique_ptr<BackgroundTask>> start(io::EventLoop& loop, Work work, Done done);
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;
  // Waits for `work` to return (it must end on its own: give it a time limit), then
  // forgets `done`.
  ~BackgroundTask();

 private:
  BackgroundTask(io::EventLoop& loop, UniqueFd finished, Done done)
      : loop_(loop), finished_(std::move(finished)), done_(std::move(done)) {}
  void on_finished();

  io::EventLoop& loop_;
  UniqueFd finished_;  // an eventfd: written once when `work` returned
  Done done_;
  std::optional<io::WatchId> watch_;
  std::thread thread_;
};

}  // namespace dsec::pool

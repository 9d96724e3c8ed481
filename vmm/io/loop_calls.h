// Calls from other threads into an event loop's thread, for state that only that thread
// touches (the pool's tables): call() queues the work, wakes the loop through an eventfd it
// watches, and waits for the result. A call the loop has not run within its timeout, or
// that was still queued when the LoopCalls went, gives nullopt to its caller.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "vmm/common/error.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop.h"

namespace dsec::io {

class LoopCalls {
 public:
  // Watches its eventfd on `loop`; create and destroy it on the loop's thread.
  static Result<std::unique_ptr<LoopCalls>> create(EventLoop& loop);
  LoopCalls(const LoopCalls&) = delete;
  LoopCalls& operator=(const LoopCalls&) = delete;
  // Stops watching; calls still queued are dropped (their callers get nullopt at once).
  ~LoopCalls();

  // Calls waiting for the loop's thread (for tests).
  size_t queued() const {
    const std::lock_guard lock(mutex_);
    return queue_.size();
  }

  // Runs `work` on the loop's thread and returns what it returned; nullopt when it did not
  // run within `timeout` (the loop is busy or stopped) or was dropped. Any thread but the
  // loop's own, which would wait for itself.
  template <typename Work>
  auto call(Work work, std::chrono::milliseconds timeout) -> std::optional<decltype(work())> {
    using T = decltype(work());
    struct Outcome {
      std::mutex mutex;
      std::condition_variable done;
      std::optional<T> value;
      bool finished = false;
    };
    auto outcome = std::make_shared<Outcome>();
    const bool queued = post([outcome, work = std::move(work)](bool run) mutable {
      std::optional<T> value;
      if (run) {
        value.emplace(work());
      }
      const std::lock_guard lock(outcome->mutex);
      outcome->value = std::move(value);
      outcome->finished = true;
      outcome->done.notify_all();
    });
    if (!queued) {
      return std::nullopt;
    }
    std::unique_lock lock(outcome->mutex);
    if (!outcome->done.wait_for(lock, timeout, [&] { return outcome->finished; })) {
      return std::nullopt;
    }
    return std::move(outcome->value);
  }

 private:
  // Called with true on the loop's thread, or with false when dropped.
  using Queued = std::move_only_function<void(bool run)>;
  LoopCalls(EventLoop& loop, EventFd wake) : loop_(loop), wake_(std::move(wake)) {}
  // False once the LoopCalls is going: `item` is dropped then.
  bool post(Queued item);
  void run_queued();

  EventLoop& loop_;
  EventFd wake_;
  std::optional<WatchId> watch_;
  mutable std::mutex mutex_;
  std::deque<Queued> queue_;
  bool closed_ = false;
};

}  // namespace dsec::io

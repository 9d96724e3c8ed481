#include "vmm/io/loop_calls.h"

namespace dsec::io {

Result<std::unique_ptr<LoopCalls>> LoopCalls::create(EventLoop& loop) {
  auto wake = DSEC_TRY(EventFd::create());
  std::unique_ptr<LoopCalls> calls(new LoopCalls(loop, std::move(wake)));
  LoopCalls* self = calls.get();
  calls->watch_ = DSEC_TRY(loop.add_fd_watch(calls->wake_.fd(), [self] { self->run_queued(); }));
  return calls;
}

LoopCalls::~LoopCalls() {
  if (watch_) {
    (void)loop_.remove_watch(*watch_);
  }
  std::deque<Queued> dropped;
  {
    const std::lock_guard lock(mutex_);
    closed_ = true;
    dropped.swap(queue_);
  }
  for (auto& item : dropped) {
    item(false);
  }
}

bool LoopCalls::post(Queued item) {
  {
    const std::lock_guard lock(mutex_);
    if (closed_) {
      return false;
    }
    queue_.push_back(std::move(item));
  }
  (void)wake_.signal();
  return true;
}

void LoopCalls::run_queued() {
  (void)wake_.consume();
  std::deque<Queued> ready;
  {
    const std::lock_guard lock(mutex_);
    ready.swap(queue_);
  }
  for (auto& item : ready) {
    item(true);
  }
}

}  // namespace dsec::io

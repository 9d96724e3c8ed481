#include "vmm/devices/virtio/loop_dispatch.h"

#include <utility>

namespace dsec::virtio {

LoopDispatch::LoopDispatch(io::EventLoop& loop, std::mutex& device_mutex, io::EventFd kick,
                           std::function<void(uint16_t)> serve, std::function<void()> on_wake)
    : loop_(loop),
      mutex_(device_mutex),
      kick_(std::move(kick)),
      serve_(std::move(serve)),
      on_wake_(std::move(on_wake)) {}

Result<std::unique_ptr<LoopDispatch>> LoopDispatch::create(io::EventLoop& loop,
                                                           std::mutex& device_mutex,
                                                           std::function<void(uint16_t)> serve,
                                                           std::function<void()> on_wake) {
  auto kick = DSEC_TRY(io::EventFd::create());
  std::unique_ptr<LoopDispatch> dispatch(
      new LoopDispatch(loop, device_mutex, std::move(kick), std::move(serve), std::move(on_wake)));
  LoopDispatch* self = dispatch.get();
  dispatch->watch_ = DSEC_TRY(loop.add_fd_watch(dispatch->kick_.fd(), [self] { self->on_kick(); }));
  return dispatch;
}

LoopDispatch::~LoopDispatch() {
  if (watch_) {
    static_cast<void>(loop_.remove_watch(*watch_));
  }
}

void LoopDispatch::notify(uint16_t queue) {
  if (queue >= kMaxQueues) {
    return;
  }
  if (std::this_thread::get_id() == loop_thread_.load(std::memory_order_relaxed)) {
    const std::lock_guard lock(mutex_);
    serve_(queue);
    return;
  }
  const std::lock_guard lock(mutex_);
  defer(queue);
}

void LoopDispatch::defer(uint16_t queue) {
  if (queue < kMaxQueues) {
    pending_ |= uint32_t{1} << queue;
  }
  wake();
}

void LoopDispatch::wake() {
  // Fails only if the counter would overflow, in which case a wake-up is pending anyway.
  static_cast<void>(kick_.signal());
}

void LoopDispatch::on_kick() {
  on_loop_thread();
  static_cast<void>(kick_.consume());
  const std::lock_guard lock(mutex_);
  if (on_wake_) {
    on_wake_();
  }
  const uint32_t pending = std::exchange(pending_, 0);
  for (uint16_t queue = 0; queue < kMaxQueues; ++queue) {
    if ((pending & (uint32_t{1} << queue)) != 0) {
      serve_(queue);
    }
  }
}

}  // namespace dsec::virtio

// How a device whose work runs on its VM's event loop takes queue notifications from any
// thread (virtio-net, virtio-vsock). The device's work runs on the loop's thread under the
// device's lock: notify() on that thread (the machine's ioeventfd handlers) serves the
// queue at once; from any other thread (a vCPU's QueueNotify write that reached the
// transport, or activate() and reset()) it records the queue and wakes the loop through
// an eventfd, whose handler serves what was recorded. So a vCPU thread never does a
// device's I/O. The loop and the lock must outlive the dispatcher, which must be destroyed
// on the loop's thread or while the loop is not running.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "vmm/common/error.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop.h"

namespace dsec::virtio {

class LoopDispatch {
 public:
  // Queues 0..kMaxQueues-1 can be recorded; notify() ignores any other.
  static constexpr uint16_t kMaxQueues = 32;

  // Both callbacks run on the loop's thread with `device_mutex` held: at each wake-up
  // `on_wake` first (a device's deferred clean-up), then `serve` for each recorded queue,
  // in queue order. Registers the dispatcher's watch on `loop`: call it on the loop's
  // thread, or before the loop runs.
  static Result<std::unique_ptr<LoopDispatch>> create(io::EventLoop& loop, std::mutex& device_mutex,
                                                      std::function<void(uint16_t queue)> serve,
                                                      std::function<void()> on_wake = {});
  ~LoopDispatch();
  LoopDispatch(const LoopDispatch&) = delete;
  LoopDispatch& operator=(const LoopDispatch&) = delete;

  // From any thread, without the device's lock: serves `queue` now on the loop's thread,
  // or on the loop's next turn from any other.
  void notify(uint16_t queue);
  // With the device's lock held, from any thread: serves `queue` on the loop's next turn.
  void defer(uint16_t queue);
  // With the device's lock held: forgets the recorded queues (a device reset).
  void clear() { pending_ = 0; }
  // From any thread: runs on_wake (and any recorded queue) on the loop's next turn.
  void wake();
  // The device's other handlers on the loop (a socket's readiness, say) say where the
  // loop runs, so that a notify() from there is served at once.
  void on_loop_thread() {
    loop_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }

 private:
  LoopDispatch(io::EventLoop& loop, std::mutex& device_mutex, io::EventFd kick,
               std::function<void(uint16_t)> serve, std::function<void()> on_wake);
  void on_kick();

  io::EventLoop& loop_;
  std::mutex& mutex_;
  io::EventFd kick_;
  const std::function<void(uint16_t)> serve_;
  const std::function<void()> on_wake_;
  std::optional<io::WatchId> watch_;
  std::atomic<std::thread::id> loop_thread_{};
  uint32_t pending_ = 0;  // recorded queues, one bit each; guarded by mutex_
};

}  // namespace dsec::virtio

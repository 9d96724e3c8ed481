// One io_uring event loop per VM: every device of the VM is served on the one thread that
// runs it. Queue notifications arrive as readiness of ioeventfds (add_fd_watch), block
// I/O is ring submissions (submit_read/submit_write/submit_fsync), rate limits and
// timeouts are ring timers (add_timer).
//
// Threading: the loop belongs to the thread that runs it. Every member except stop() must
// be called on that thread, which means from a handler or a completion while the loop
// runs, or from the owning thread before run() starts or after it returns. Only the thread
// that runs the loop (or destroys it) enters the kernel with submissions: the calls below queue
// work, and the next turn of the loop submits it, so a batch of handlers costs one system call.
//
// Callbacks: handlers and completions run on the loop thread, never from inside the call
// that registered them, and never after the watch or timer was removed. Destroying the
// loop cancels what is outstanding, waits for the kernel to let go of it, and drops the
// callbacks without calling them.
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "vmm/common/error.h"

namespace dsec::io {

struct WatchId {
  uint64_t key = 0;
  friend bool operator==(WatchId, WatchId) = default;
};

struct TimerId {
  uint64_t key = 0;
  friend bool operator==(TimerId, TimerId) = default;
};

enum class PollMode {
  // One multishot poll per watch when the kernel has it (5.13+), re-armed polls before.
  kMultishotIfSupported,
  // A one-shot poll per readiness, re-armed after each handler call (the pre-5.13 path;
  // tests use it to cover that path on newer kernels).
  kRearm,
};

class EventLoop {
 public:
  using Handler = std::move_only_function<void()>;
  // Receives the operation's result: bytes transferred (which may be fewer than asked:
  // the caller resubmits the rest, and a read at end of file gives 0) or -errno. Among
  // those, -ECANCELED: the thread that ran the loop exited while the operation was in
  // flight, which the kernel answers by cancelling that thread's requests (so quiesce
  // devices before stopping the loop). Watches and timers are simply armed again.
  using Completion = std::move_only_function<void(int32_t result)>;

  // `entries` sizes the submission ring (the completion ring is twice that); more
  // outstanding operations than the rings hold wait in a backlog, in order. The ring takes
  // no operation but the loop's own (ring_restrictions.h), where the kernel can restrict it.
  static Result<EventLoop> create(unsigned entries = 256,
                                  PollMode poll_mode = PollMode::kMultishotIfSupported);

  EventLoop(EventLoop&&) noexcept;
  EventLoop& operator=(EventLoop&&) noexcept;
  ~EventLoop();

  // Calls `handler` on the loop thread when `fd` is ready for `events`. The handler must
  // consume what made the fd ready (read the eventfd): it is called again on each new
  // readiness, once per batch of completions however many signals the batch covers.
  Result<WatchId> add_fd_watch(int fd, Handler handler, uint32_t events = POLLIN);
  // From the moment it returns, the handler is never called again, even for a readiness
  // the kernel already reported; a handler may remove its own watch. The handler is
  // destroyed once the kernel confirms the poll's end.
  Status remove_watch(WatchId id);

  // Asynchronous positioned I/O on `fd`. The iovec array is copied; the memory it points
  // to belongs to the caller (for a block device, guest memory) and must stay valid and
  // untouched until `done` runs or the loop is destroyed, whichever comes first.
  Status submit_read(int fd, std::span<const iovec> iovecs, uint64_t offset, Completion done);
  Status submit_write(int fd, std::span<const iovec> iovecs, uint64_t offset, Completion done);
  // fsync(2), or fdatasync(2) when `datasync`; `done` receives 0 or -errno.
  Status submit_fsync(int fd, bool datasync, Completion done);

  // Calls `handler` once, `delay` from now (CLOCK_MONOTONIC). Timers due at different
  // times fire in order of their deadlines.
  Result<TimerId> add_timer(std::chrono::nanoseconds delay, Handler handler);
  // From the moment it returns, the handler is never called.
  Status cancel_timer(TimerId id);

  // Runs on the calling thread until stop(); a stop() that came before run() counts.
  Status run();
  // One turn of the loop: submits what is queued, waits up to `timeout` (0: not at all)
  // for completions, and dispatches them. Returns how many completions it dispatched.
  Result<std::size_t> run_once(std::chrono::nanoseconds timeout);
  // Makes run() return soon. Safe from any thread: it sets a flag and signals an eventfd.
  void stop();

  // Whether watches use multishot polls (the kernel supports them and it was asked for).
  bool uses_multishot_poll() const;
  // Operations the loop still tracks: live watches and timers, queued and in-flight I/O,
  // and removed ones the kernel has not released yet. The loop's own wake-up watch counts.
  std::size_t pending_operations() const;

 private:
  struct State;
  explicit EventLoop(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

}  // namespace dsec::io

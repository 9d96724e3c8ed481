#include "vmm/io/event_loop.h"

#include <liburing.h>
#include <limits.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "vmm/io/event_fd.h"
#include "vmm/io/io_op.h"
#include "vmm/io/ring_restrictions.h"
#include "vmm/io/slot_table.h"

namespace dsec::io {
namespace {

// user_data of cancellation requests. No operation has this key, and their results need
// nothing but counting.
constexpr uint64_t kCancelKey = SlotTable<IoOp>::kNoKey;
// CQEs copied out of the ring at a time before their callbacks run.
constexpr unsigned kCqeBatch = 64;
// How long destruction waits for operations that cannot be cancelled (a read already
// running on a slow disk) before it gives up on them and closes the ring anyway.
constexpr auto kDrainTimeout = std::chrono::seconds(10);
constexpr auto kDrainStep = std::chrono::milliseconds(100);

__kernel_timespec to_timespec(std::chrono::nanoseconds d) {
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(d);
  return {secs.count(), (d - secs).count()};
}

std::chrono::nanoseconds monotonic_now() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

// Multishot poll came with Linux 5.13, as did IORING_FEAT_RSRC_TAGS; there is no feature
// bit of its own. Should a kernel reject it anyway, its -EINVAL turns the loop to re-armed
// polls (see on_watch).
bool kernel_has_multishot_poll(unsigned features) {
  return (features & IORING_FEAT_RSRC_TAGS) != 0;
}

struct Cqe {
  uint64_t key;
  int32_t res;
  uint32_t flags;
};

}  // namespace

struct EventLoop::State {
  // An SQE that could not go into the ring yet: the operation itself, or its cancellation.
  struct Pending {
    uint64_t key;
    bool cancel;
  };

  explicit State(EventFd wake_fd) : wake(std::move(wake_fd)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State();

  uint64_t add_watch(int fd, uint32_t events, Handler handler);
  SlotTable<IoOp>::Allocated add_op(IoOpKind kind);
  // A read or write of `iovecs` at `offset`, checked and started.
  Status submit_transfer(IoOpKind kind, const char* what, int fd, std::span<const iovec> iovecs,
                         uint64_t offset, Completion done);
  void start(uint64_t key, IoOp& op);
  void cancel(uint64_t key, IoOp& op);
  Result<std::size_t> turn(__kernel_timespec* timeout);

  io_uring_sqe* get_sqe(bool within_cap);
  bool try_prepare(uint64_t key, IoOp& op);
  bool try_prepare_cancel(uint64_t key);
  void drain_backlog();
  std::size_t reap(bool call_back);
  void dispatch(const Cqe& cqe, bool call_back);
  void on_watch(uint64_t key, IoOp& op, int32_t res, bool last);
  void on_timer(uint64_t key, IoOp& op, int32_t res);
  void on_io(uint64_t key, IoOp& op, int32_t res);
  void maybe_release(uint64_t key, IoOp& op);
  void drain_for_destruction();

  io_uring ring{};
  bool ring_ready = false;
  EventFd wake;
  std::atomic<bool> stop_requested{false};
  SlotTable<IoOp> ops;
  std::deque<Pending> backlog;
  unsigned in_flight = 0;     // SQEs in the ring whose last CQE has not been reaped
  unsigned io_in_flight = 0;  // those of them that are reads, writes and fsyncs
  unsigned cq_entries = 0;    // the CQ ring's size, and the cap on I/O in flight
  bool multishot = false;
  bool in_turn = false;  // the loop thread is inside turn(): it may enter the kernel
  uint64_t batch = 0;    // counts CQE batches, to call a watch's handler once per batch
};

EventLoop::State::~State() {
  if (ring_ready) {
    drain_for_destruction();
    io_uring_queue_exit(&ring);
  }
}

SlotTable<IoOp>::Allocated EventLoop::State::add_op(IoOpKind kind) {
  auto added = ops.allocate();
  added.value.kind = kind;
  return added;
}

uint64_t EventLoop::State::add_watch(int fd, uint32_t events, Handler handler) {
  auto [key, op] = add_op(IoOpKind::kWatch);
  op.fd = fd;
  op.poll_events = events;
  op.multishot = multishot;
  op.handler = std::move(handler);
  start(key, op);
  return key;
}

// Puts the operation's SQE in the ring, or at the back of the backlog, which keeps SQEs
// in the order they were asked for (a cancellation must follow what it cancels).
void EventLoop::State::start(uint64_t key, IoOp& op) {
  if (backlog.empty() && try_prepare(key, op)) {
    return;
  }
  backlog.push_back({key, false});
  op.queued = true;
}

void EventLoop::State::cancel(uint64_t key, IoOp& op) {
  op.cancelled = true;
  if (op.armed && !(backlog.empty() && try_prepare_cancel(key))) {
    backlog.push_back({key, true});
  }
  maybe_release(key, op);
}

// A free SQE, or nullptr. Reads, writes and fsyncs stop at the CQ ring's size so that a
// flood of them never overflows it (`within_cap`). Watches, timers and cancellations are
// few and may pass (the kernel keeps overflowed CQEs): an idle watch must never wait
// behind the cap, or stop() could not wake the loop.
io_uring_sqe* EventLoop::State::get_sqe(bool within_cap) {
  if (within_cap && io_in_flight >= cq_entries) {
    return nullptr;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (sqe == nullptr && in_turn && io_uring_submit(&ring) >= 0) {
    // The SQ ring was full: the kernel has taken its SQEs, so there is room again. Only
    // the loop thread submits: the kernel ties requests to the task that submitted them.
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

bool EventLoop::State::try_prepare(uint64_t key, IoOp& op) {
  const bool is_io = is_file_io(op.kind);
  io_uring_sqe* sqe = get_sqe(/*within_cap=*/is_io);
  if (sqe == nullptr) {
    return false;
  }
  prepare_sqe(sqe, op, key);
  op.armed = true;
  ++in_flight;
  io_in_flight += is_io ? 1 : 0;
  return true;
}

bool EventLoop::State::try_prepare_cancel(uint64_t key) {
  io_uring_sqe* sqe = get_sqe(/*within_cap=*/false);
  if (sqe == nullptr) {
    return false;
  }
  io_uring_prep_cancel64(sqe, key, 0);
  io_uring_sqe_set_data64(sqe, kCancelKey);
  ++in_flight;
  return true;
}

void EventLoop::State::drain_backlog() {
  while (!backlog.empty()) {
    const Pending pending = backlog.front();
    IoOp* op = ops.find(pending.key);
    if (pending.cancel) {
      if (op != nullptr && op->armed && !try_prepare_cancel(pending.key)) {
        return;
      }
    } else if (op != nullptr && op->cancelled) {
      op->queued = false;  // removed before it ever reached the kernel
      maybe_release(pending.key, *op);
    } else if (op != nullptr) {
      if (!try_prepare(pending.key, *op)) {
        return;
      }
      op->queued = false;
    }
    backlog.pop_front();
  }
}

Result<std::size_t> EventLoop::State::turn(__kernel_timespec* timeout) {
  if (in_turn) {
    return fail("the event loop was run from one of its own callbacks",
                "return from the callback instead; the loop calls the next one");
  }
  struct TurnScope {
    explicit TurnScope(bool& flag) : flag_(flag) { flag_ = true; }
    TurnScope(const TurnScope&) = delete;
    TurnScope& operator=(const TurnScope&) = delete;
    ~TurnScope() { flag_ = false; }
    bool& flag_;
  } scope(in_turn);
  drain_backlog();
  io_uring_cqe* first = nullptr;
  const int r = io_uring_submit_and_wait_timeout(&ring, &first, 1, timeout, nullptr);
  // ETIME: nothing completed in time. EINTR: a signal. EBUSY/EAGAIN: the kernel wants
  // completions reaped (or memory) before it takes more SQEs; they stay queued.
  if (r < 0 && r != -ETIME && r != -EINTR && r != -EBUSY && r != -EAGAIN) {
    return fail_errno("io_uring_enter (event loop)", -r);
  }
  const std::size_t dispatched = reap(/*call_back=*/true);
  drain_backlog();  // room freed by completions goes to waiting operations right away
  return dispatched;
}

std::size_t EventLoop::State::reap(bool call_back) {
  std::size_t total = 0;
  std::array<io_uring_cqe*, kCqeBatch> ring_cqes{};
  std::array<Cqe, kCqeBatch> cqes{};
  // At most one ring's worth per turn, so that a flood of completions cannot keep the
  // loop from submitting what its callbacks queued.
  while (total < cq_entries) {
    const unsigned n = io_uring_peek_batch_cqe(&ring, ring_cqes.data(), kCqeBatch);
    if (n == 0) {
      break;
    }
    // Copy, then free the ring's slots before any callback runs: callbacks may make the
    // kernel post more.
    for (unsigned i = 0; i < n; ++i) {
      cqes[i] = {ring_cqes[i]->user_data, ring_cqes[i]->res, ring_cqes[i]->flags};
    }
    io_uring_cq_advance(&ring, n);
    ++batch;
    for (unsigned i = 0; i < n; ++i) {
      dispatch(cqes[i], call_back);
    }
    total += n;
  }
  return total;
}

void EventLoop::State::dispatch(const Cqe& cqe, bool call_back) {
  if (cqe.key == kCancelKey) {
    --in_flight;
    return;
  }
  // The key is looked up, never trusted: a stale or foreign one (liburing's own timeout
  // on old kernels) finds nothing.
  IoOp* op = ops.find(cqe.key);
  if (op == nullptr) {
    return;
  }
  const bool last = (cqe.flags & IORING_CQE_F_MORE) == 0;
  if (last) {
    op->armed = false;
    --in_flight;
    io_in_flight -= is_file_io(op->kind) ? 1 : 0;
  }
  if (!call_back) {
    op->cancelled = true;
    maybe_release(cqe.key, *op);
    return;
  }
  switch (op->kind) {
    case IoOpKind::kWatch:
      on_watch(cqe.key, *op, cqe.res, last);
      break;
    case IoOpKind::kTimer:
      on_timer(cqe.key, *op, cqe.res);
      break;
    case IoOpKind::kRead:
    case IoOpKind::kWrite:
    case IoOpKind::kFsync:
      on_io(cqe.key, *op, cqe.res);
      break;
  }
}

void EventLoop::State::on_watch(uint64_t key, IoOp& op, int32_t res, bool last) {
  if (op.cancelled) {
    maybe_release(key, op);  // a readiness or the -ECANCELED that ends a removed watch
    return;
  }
  if (res < 0) {
    if (res == -EINVAL && op.multishot) {
      spdlog::info("io_uring: the kernel has no multishot poll; re-arming polls instead");
      multishot = false;
      op.multishot = false;
    } else if (res != -ECANCELED) {
      // Not cancelled by us (that would have set op.cancelled). ECANCELED without that
      // means the task that submitted the poll exited; arm it again from this thread.
      spdlog::error("io_uring: watch on fd {} failed ({}); it is dropped", op.fd,
                    std::strerror(-res));
      op.cancelled = true;
      maybe_release(key, op);
      return;
    }
    if (last) {
      start(key, op);
    }
    return;
  }
  // CQEs copied in one batch were all posted before this handler runs, so one call
  // covers every readiness among them.
  if (op.fired_batch != batch) {
    op.fired_batch = batch;
    op.in_handler = true;
    op.handler();
    op.in_handler = false;
  }
  if (op.cancelled) {
    maybe_release(key, op);  // the handler removed its own watch
  } else if (last) {
    start(key, op);  // a one-shot poll, or a multishot one the kernel ended
  }
}

void EventLoop::State::on_timer(uint64_t key, IoOp& op, int32_t res) {
  if (!op.cancelled && res == -ECANCELED) {
    // Ended by the exit of the task that submitted it; the deadline is absolute.
    start(key, op);
    return;
  }
  Handler handler = std::move(op.handler);
  const bool fire = !op.cancelled && (res == -ETIME || res == 0);
  if (!fire && !op.cancelled) {
    spdlog::error("io_uring: timer failed ({}); it will not fire", std::strerror(-res));
  }
  op.reset();
  ops.release(key);
  if (fire) {
    handler();
  }
}

void EventLoop::State::on_io(uint64_t key, IoOp& op, int32_t res) {
  // Released before the completion runs, so that it can submit the next operation.
  Completion done = std::move(op.completion);
  op.reset();
  ops.release(key);
  done(res);
}

void EventLoop::State::maybe_release(uint64_t key, IoOp& op) {
  if (op.cancelled && !op.armed && !op.queued && !op.in_handler) {
    op.reset();
    ops.release(key);
  }
}

// Cancels everything in the ring and waits until the kernel has answered for all of it:
// only then may the buffers of reads and the records the kernel points into go away.
void EventLoop::State::drain_for_destruction() {
  in_turn = true;  // the destructor's thread enters the kernel now
  backlog.clear();
  std::vector<uint64_t> armed;
  ops.for_each_live([&](uint64_t key, IoOp& op) {
    op.queued = false;
    op.cancelled = true;
    if (op.armed) {
      armed.push_back(key);
    }
  });
  const auto deadline = monotonic_now() + kDrainTimeout;
  __kernel_timespec step = to_timespec(kDrainStep);
  auto wait_a_step = [&] {
    io_uring_cqe* first = nullptr;
    io_uring_submit_and_wait_timeout(&ring, &first, 1, &step, nullptr);
    reap(/*call_back=*/false);
  };
  for (const uint64_t key : armed) {
    while (ops.find(key) != nullptr && !try_prepare_cancel(key) && monotonic_now() < deadline) {
      wait_a_step();
    }
  }
  while (in_flight > 0 && monotonic_now() < deadline) {
    wait_a_step();
  }
  if (in_flight > 0) {
    spdlog::error(
        "io_uring: {} operations still running {} s after the event loop was destroyed; "
        "closing the ring anyway, and the kernel may still write their buffers",
        in_flight, kDrainTimeout.count());
  }
  in_turn = false;
}

Result<EventLoop> EventLoop::create(unsigned entries, PollMode poll_mode) {
  if (entries == 0) {
    return fail("event loop: the ring needs at least one entry");
  }
  auto state = std::make_unique<State>(DSEC_TRY(EventFd::create()));
  // SUBMIT_ALL (5.18) keeps submitting after an SQE that fails early; CLAMP (5.6) caps
  // `entries` at the kernel's maximum instead of failing; R_DISABLED (5.10) leaves the ring
  // off until it is restricted to the loop's operations (ring_restrictions.h). Each older
  // kernel gets the flags it knows.
  io_uring_params params{};
  int r = -EINVAL;
  for (const unsigned flags :
       {IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_R_DISABLED,
        IORING_SETUP_CLAMP | IORING_SETUP_R_DISABLED, IORING_SETUP_CLAMP}) {
    params = {};
    params.flags = flags;
    r = io_uring_queue_init_params(entries, &state->ring, &params);
    if (r != -EINVAL) {
      break;
    }
  }
  if (r < 0) {
    return fail_errno("io_uring_setup with " + std::to_string(entries) + " entries", -r,
                      "io_uring may be disabled (sysctl kernel.io_uring_disabled) or denied by "
                      "seccomp; older kernels also need RLIMIT_MEMLOCK for the rings");
  }
  state->ring_ready = true;
  if ((params.flags & IORING_SETUP_R_DISABLED) != 0) {
    DSEC_TRY(restrict_to_loop_operations(state->ring));
  } else {
    spdlog::warn(
        "io_uring: this kernel cannot restrict a ring (Linux 5.10 has it): the event "
        "loop's ring takes any operation");
  }
  state->cq_entries = params.cq_entries;
  state->multishot =
      poll_mode == PollMode::kMultishotIfSupported && kernel_has_multishot_poll(params.features);
  // stop() signals this eventfd to wake a loop waiting in the kernel.
  State* s = state.get();
  s->add_watch(s->wake.fd(), POLLIN, [s] { static_cast<void>(s->wake.consume()); });
  return EventLoop(std::move(state));
}

EventLoop::EventLoop(std::unique_ptr<State> state) : state_(std::move(state)) {}
EventLoop::EventLoop(EventLoop&&) noexcept = default;
EventLoop& EventLoop::operator=(EventLoop&&) noexcept = default;
EventLoop::~EventLoop() = default;

Result<WatchId> EventLoop::add_fd_watch(int fd, Handler handler, uint32_t events) {
  if (fd < 0) {
    return fail("add_fd_watch: invalid fd " + std::to_string(fd));
  }
  if (!handler) {
    return fail("add_fd_watch: the handler is empty");
  }
  return WatchId{state_->add_watch(fd, events, std::move(handler))};
}

Status EventLoop::remove_watch(WatchId id) {
  IoOp* op = state_->ops.find(id.key);
  if (op == nullptr || op->kind != IoOpKind::kWatch || op->cancelled) {
    return fail("remove_watch: no such watch", "was it removed already?");
  }
  state_->cancel(id.key, *op);
  return ok();
}

namespace {

Status check_io(const char* what, std::span<const iovec> iovecs,
                const EventLoop::Completion& done) {
  if (iovecs.size() > IOV_MAX) {
    return fail(std::string(what) + ": " + std::to_string(iovecs.size()) +
                " iovecs, more than IOV_MAX (" + std::to_string(IOV_MAX) + ")");
  }
  if (!done) {
    return fail(std::string(what) + ": the completion is empty");
  }
  return ok();
}

}  // namespace

Status EventLoop::State::submit_transfer(IoOpKind kind, const char* what, int fd,
                                         std::span<const iovec> iovecs, uint64_t offset,
                                         Completion done) {
  DSEC_TRY(check_io(what, iovecs, done));
  auto [key, op] = add_op(kind);
  op.fd = fd;
  op.iovecs.assign(iovecs.begin(), iovecs.end());
  op.offset = offset;
  op.completion = std::move(done);
  start(key, op);
  return ok();
}

Status EventLoop::submit_read(int fd, std::span<const iovec> iovecs, uint64_t offset,
                              Completion done) {
  return state_->submit_transfer(IoOpKind::kRead, "submit_read", fd, iovecs, offset,
                                 std::move(done));
}

Status EventLoop::submit_write(int fd, std::span<const iovec> iovecs, uint64_t offset,
                               Completion done) {
  return state_->submit_transfer(IoOpKind::kWrite, "submit_write", fd, iovecs, offset,
                                 std::move(done));
}

Status EventLoop::submit_fsync(int fd, bool datasync, Completion done) {
  DSEC_TRY(check_io("submit_fsync", {}, done));
  auto [key, op] = state_->add_op(IoOpKind::kFsync);
  op.fd = fd;
  op.datasync = datasync;
  op.completion = std::move(done);
  state_->start(key, op);
  return ok();
}

Result<TimerId> EventLoop::add_timer(std::chrono::nanoseconds delay, Handler handler) {
  if (!handler) {
    return fail("add_timer: the handler is empty");
  }
  auto [key, op] = state_->add_op(IoOpKind::kTimer);
  op.deadline = to_timespec(monotonic_now() + std::max(delay, std::chrono::nanoseconds(0)));
  op.handler = std::move(handler);
  state_->start(key, op);
  return TimerId{key};
}

Status EventLoop::cancel_timer(TimerId id) {
  IoOp* op = state_->ops.find(id.key);
  if (op == nullptr || op->kind != IoOpKind::kTimer || op->cancelled) {
    return fail("cancel_timer: no such timer", "has it fired or been cancelled already?");
  }
  state_->cancel(id.key, *op);
  return ok();
}

Status EventLoop::run() {
  while (!state_->stop_requested.load(std::memory_order_acquire)) {
    DSEC_TRY(state_->turn(nullptr));
  }
  state_->stop_requested.store(false, std::memory_order_release);
  return ok();
}

Result<std::size_t> EventLoop::run_once(std::chrono::nanoseconds timeout) {
  __kernel_timespec ts = to_timespec(std::max(timeout, std::chrono::nanoseconds(0)));
  return state_->turn(&ts);
}

void EventLoop::stop() {
  state_->stop_requested.store(true, std::memory_order_release);
  static_cast<void>(state_->wake.signal());
}

bool EventLoop::uses_multishot_poll() const {
  return state_->multishot;
}

std::size_t EventLoop::pending_operations() const {
  return state_->ops.live();
}

}  // namespace dsec::io

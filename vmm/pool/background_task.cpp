#include "vmm/pool/background_task.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace dsec::pool {

Result<std::unique_ptr<BackgroundTask>> BackgroundTask::start(io::EventLoop& loop, Work work,
                                                              Done done) {
  UniqueFd finished(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!finished) {
    return fail_errno("eventfd", errno);
  }
  std::unique_ptr<BackgroundTask> task(
      new BackgroundTask(loop, std::move(finished), std::move(done)));
  auto watch =
      DSEC_TRY(loop.add_fd_watch(task->finished_.get(), [t = task.get()] { t->on_finished(); }));
  task->watch_ = watch;
  try {
    task->thread_ = std::thread([work = std::move(work), fd = task->finished_.get()]() mutable {
      work();
      const uint64_t one = 1;
      // An eventfd write of 1 fails only past 2^64 - 2: never here.
      (void)::write(fd, &one, sizeof one);
    });
  } catch (const std::system_error& e) {
    (void)loop.remove_watch(watch);
    task->watch_.reset();
    return fail_errno("cannot start a thread for the request", e.code().value());
  }
  return task;
}

BackgroundTask::~BackgroundTask() {
  if (watch_) {
    (void)loop_.remove_watch(*watch_);
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

void BackgroundTask::on_finished() {
  uint64_t count = 0;
  if (::read(finished_.get(), &count, sizeof count) != sizeof count) {
    return;  // not written yet (a spurious wake-up)
  }
  if (watch_) {
    (void)loop_.remove_watch(*watch_);
    watch_.reset();
  }
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done();  // may destroy this
  }
}

}  // namespace dsec::pool

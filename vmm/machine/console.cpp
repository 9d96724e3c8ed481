#include "vmm/machine/console.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "vmm/machine/thread_kick.h"

namespace dsec::machine {

using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<Console>> Console::create(const Settings& settings) {
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) {
    return fail_errno("eventfd for the console thread", errno);
  }
  install_thread_kick_handler();
  return std::unique_ptr<Console>(new Console(settings, std::move(wake)));
}

Console::Console(const Settings& settings, UniqueFd wake)
    : settings_(settings), wake_(std::move(wake)) {
  if (settings_.output_fd < 0) {
    output_stopped_.store(true);
  }
}

Console::~Console() {
  stop();
}

devices::Serial::OutputSink Console::output_sink() {
  return [this](std::span<const uint8_t> bytes) {
    if (output_stopped_.load(std::memory_order_relaxed)) {
      dropped_output_stopped_.fetch_add(bytes.size(), std::memory_order_relaxed);
      return;
    }
    if (buffer_.push(bytes)) {
      wake();
    }
  };
}

void Console::wake() {
  const uint64_t one = 1;
  // Non-blocking: a counter already signalled (or saturated) wakes the thread as well.
  [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

Status Console::start(devices::Serial* serial, std::function<Status()> lock_down) {
  if (thread_.joinable() || (settings_.output_fd < 0 && settings_.input_fd < 0)) {
    return ok();
  }
  try {
    thread_ = std::thread([this, serial, lock_down = std::move(lock_down)] {
      pthread_setname_np(pthread_self(), "dsec-console");
      // A write to a pipe whose reader is gone fails with EPIPE; its SIGPIPE, blocked in this
      // thread, stays pending here instead of killing the process (main() ignores it too).
      sigset_t pipe_signal;
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      if (!lock_down || lock_down()) {
        run(serial);
      }
      const std::lock_guard lock(finished_mutex_);
      finished_ = true;
      finished_cv_.notify_all();
    });
  } catch (const std::system_error& e) {
    return fail("cannot start the console thread: " + std::string(e.what()));
  }
  return ok();
}

void Console::stop() {
  if (!thread_.joinable()) {
    return;
  }
  stopping_.store(true);
  wake();
  // The thread flushes for kFlushTimeout. Past that (and a margin), a write the output never
  // takes holds it: interrupt the write until the thread sees that it is stopping.
  std::unique_lock lock(finished_mutex_);
  auto next_check = Clock::now() + kFlushTimeout + std::chrono::milliseconds(50);
  while (!finished_cv_.wait_until(lock, next_check, [this] { return finished_; })) {
    pthread_kill(thread_.native_handle(), thread_kick_signal());
    next_check = Clock::now() + std::chrono::milliseconds(10);
  }
  lock.unlock();
  thread_.join();
  // What the output did not take in time is dropped with it.
  dropped_output_stopped_.fetch_add(buffer_.discard());
  log_drops();
}

Console::Figures Console::figures() const {
  return {.written = written_.load(),
          .dropped_slow_reader = buffer_.dropped(),
          .dropped_output_stopped = dropped_output_stopped_.load(),
          .limit_reached = limit_reached_.load(),
          .output_failed = output_failed_.load()};
}

void Console::log_drops() const {
  const Figures f = figures();
  if (f.dropped_slow_reader == 0 && f.dropped_output_stopped == 0) {
    return;
  }
  spdlog::info(
      "console: {} bytes of the guest's console output written; {} dropped because the host "
      "read them slower than the guest wrote, {} after the output stopped{}",
      f.written, f.dropped_slow_reader, f.dropped_output_stopped,
      f.limit_reached           ? " at its limit"
      : f.output_failed         ? " on an error"
      : settings_.output_fd < 0 ? " (there is no output)"
                                : "");
}

void Console::stop_output() {
  output_stopped_.store(true);
  dropped_output_stopped_.fetch_add(buffer_.discard());
}

void Console::write_output() {
  std::array<uint8_t, kWriteChunk> chunk{};
  size_t n = buffer_.peek(chunk);
  if (settings_.output_limit != 0) {
    n = static_cast<size_t>(std::min<uint64_t>(n, settings_.output_limit - written_.load()));
  }
  if (n == 0) {
    return;
  }
  const ssize_t written = ::write(settings_.output_fd, chunk.data(), n);
  if (written > 0) {
    buffer_.consume(static_cast<size_t>(written));
    const uint64_t total =
        written_.fetch_add(static_cast<uint64_t>(written)) + static_cast<uint64_t>(written);
    if (settings_.output_limit != 0 && total >= settings_.output_limit) {
      limit_reached_.store(true);
      stop_output();
      spdlog::warn(
          "console: the guest's console output reached its limit of {} bytes; the rest is "
          "dropped",
          settings_.output_limit);
    }
    return;
  }
  if (written < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
    return;  // interrupted, or a non-blocking fd full after all: poll again
  }
  const int err = written < 0 ? errno : EIO;
  output_failed_.store(true);
  stop_output();
  spdlog::warn("console: writing the guest's console output failed: {}; the rest is dropped",
               std::strerror(err));
}

void Console::run(devices::Serial* serial) {
  std::vector<uint8_t> pending;  // host input the UART's receive FIFO had no room for yet
  std::array<uint8_t, 256> input{};
  bool input_open = settings_.input_fd >= 0;
  auto flush_deadline = Clock::time_point::max();  // set once stopping
  while (true) {
    const bool stopping = stopping_.load();
    if (stopping && flush_deadline == Clock::time_point::max()) {
      flush_deadline = Clock::now() + kFlushTimeout;
    }
    if (!pending.empty()) {
      const size_t taken = serial->enqueue_input(pending);
      pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(taken));
    }
    if (!slow_reader_logged_ && buffer_.dropped() > 0) {
      slow_reader_logged_ = true;
      spdlog::warn(
          "console: the guest writes to its console faster than the host reads it; what does "
          "not fit the {} KiB buffer is dropped (the count is logged when the VM ends)",
          kOutputBufferBytes / 1024);
    }
    const bool output_waiting = !output_stopped_.load() && buffer_.size() > 0;
    if (stopping && (!output_waiting || Clock::now() >= flush_deadline)) {
      return;
    }
    const bool want_input = !stopping && input_open && pending.empty();
    // poll() skips negative fds: one that is not wanted is left out, so that its hang-up
    // (a closed pipe always shows one) does not wake the loop for nothing.
    std::array<pollfd, 3> fds{{{wake_.get(), POLLIN, 0},
                               {output_waiting ? settings_.output_fd : -1, POLLOUT, 0},
                               {want_input ? settings_.input_fd : -1, POLLIN, 0}}};
    int timeout_ms = -1;
    if (stopping) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(flush_deadline - Clock::now()).count()));
    } else if (!pending.empty()) {
      timeout_ms = 5;  // the guest reads its FIFO: try again soon
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) {
        continue;
      }
      spdlog::warn("console: poll: {}; the console thread ends", std::strerror(errno));
      stop_output();
      return;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_.get(), &count, sizeof count);
    }
    if (fds[1].revents != 0) {
      write_output();  // POLLERR or POLLHUP: the write says what went wrong
    }
    if (fds[2].revents != 0) {
      const ssize_t n = ::read(settings_.input_fd, input.data(), input.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      if (n <= 0) {
        input_open = false;  // end of input: the guest just gets no more
        continue;
      }
      pending.assign(input.begin(), input.begin() + n);
    }
  }
}

}  // namespace dsec::machine

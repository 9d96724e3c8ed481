#include "vmm/io/signal_watcher.h"

#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace dsec::io {

BlockedSignals::BlockedSignals(std::initializer_list<int> signals) {
  sigemptyset(&set_);
  for (const int signo : signals) {
    sigaddset(&set_, signo);
  }
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

Result<std::unique_ptr<SignalWatcher>> SignalWatcher::start(const BlockedSignals& signals,
                                                            std::function<void(int)> on_signal,
                                                            std::function<Status()> setup) {
  UniqueFd signal_fd(::signalfd(-1, &signals.set(), SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd) {
    return fail_errno("signalfd", errno);
  }
  auto stop = EventFd::create();
  if (!stop) {
    return std::unexpected(stop.error().with_context("signal watcher"));
  }
  return std::unique_ptr<SignalWatcher>(new SignalWatcher(std::move(signal_fd), std::move(*stop),
                                                          std::move(on_signal), std::move(setup)));
}

SignalWatcher::SignalWatcher(UniqueFd signal_fd, EventFd stop, std::function<void(int)> on_signal,
                             std::function<Status()> setup)
    : signal_fd_(std::move(signal_fd)),
      stop_(std::move(stop)),
      on_signal_(std::move(on_signal)),
      setup_(std::move(setup)),
      thread_([this] { run(); }) {}

SignalWatcher::~SignalWatcher() {
  // Fails only if the counter would overflow: it is written once.
  [[maybe_unused]] const Status signalled = stop_.signal();
  thread_.join();
}

void SignalWatcher::run() {
  pthread_setname_np(pthread_self(), "dsec-signals");
  if (setup_) {
    if (auto set = setup_(); !set) {
      spdlog::error("signal watcher: {}; signals are no longer handled", set.error().message());
      return;
    }
  }
  for (;;) {
    pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      spdlog::error("signal watcher: poll failed ({}); signals are no longer handled",
                    std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) {
      return;
    }
    signalfd_siginfo info{};
    while (::read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      on_signal_(static_cast<int>(info.ssi_signo));
    }
  }
}

}  // namespace dsec::io

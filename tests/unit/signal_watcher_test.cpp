// SignalWatcher: process signals reach the callback on the watcher's thread, in order.
#include "vmm/io/signal_watcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace dsec::io {
namespace {

// SIGURG and SIGWINCH are ignored by default: should one reach a thread of the test
// process that does not block it, the test fails instead of the process dying.
class Received {
 public:
  void add(int signo) {
    std::lock_guard lock(mutex_);
    signals_.push_back(signo);
    threads_.push_back(std::this_thread::get_id());
    changed_.notify_all();
  }
  bool wait_for_count(std::size_t n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return signals_.size() >= n; });
  }
  std::vector<int> signals() {
    std::lock_guard lock(mutex_);
    return signals_;
  }
  std::vector<std::thread::id> threads() {
    std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> signals_;
  std::vector<std::thread::id> threads_;
};

TEST(SignalWatcher, DeliversEachSignalOfTheSetOnItsOwnThread) {
  BlockedSignals blocked{SIGURG, SIGWINCH};
  Received received;
  auto watcher = SignalWatcher::start(blocked, [&](int signo) { received.add(signo); });
  ASSERT_TRUE(watcher) << watcher.error().message();

  ASSERT_EQ(::kill(::getpid(), SIGURG), 0);
  ASSERT_TRUE(received.wait_for_count(1));
  ASSERT_EQ(::kill(::getpid(), SIGWINCH), 0);
  ASSERT_TRUE(received.wait_for_count(2));
  ASSERT_EQ(::kill(::getpid(), SIGURG), 0);
  ASSERT_TRUE(received.wait_for_count(3));

  EXPECT_EQ(received.signals(), (std::vector<int>{SIGURG, SIGWINCH, SIGURG}));
  for (const auto id : received.threads()) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(SignalWatcher, StopsWithoutASignalAndLeavesLaterOnesPending) {
  BlockedSignals blocked{SIGURG};
  Received received;
  {
    auto watcher = SignalWatcher::start(blocked, [&](int signo) { received.add(signo); });
  }
  // The watcher is gone: the signal stays pending (blocked), nothing is called.
  ASSERT_EQ(::kill(::getpid(), SIGURG), 0);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_TRUE(sigismember(&pending, SIGURG));
  EXPECT_TRUE(received.signals().empty());
  // Consume it, so that it does not linger for the next test in this process.
  int signo = 0;
  sigwait(&blocked.set(), &signo);
  EXPECT_EQ(signo, SIGURG);
}

}  // namespace
}  // namespace dsec::io

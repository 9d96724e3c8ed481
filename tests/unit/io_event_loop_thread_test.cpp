// EventLoopThread: the VM's loop runs on a thread of its own and is stopped and joined
// with its owner.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "tests/support/result_matchers.h"
#include "vmm/io/event_fd.h"
#include "vmm/io/event_loop_thread.h"

namespace dsec::io {
namespace {

using namespace std::chrono_literals;

TEST(EventLoopThread, RunsHandlersOnItsOwnNamedThreadUntilStopped) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  struct Seen {
    std::thread::id id;
    std::string name;
  };
  std::promise<Seen> seen;
  bool first = true;
  auto on_signal = [&] {
    ASSERT_OK(efd.consume());
    if (!std::exchange(first, false)) {
      return;
    }
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    seen.set_value({std::this_thread::get_id(), name});
  };
  ASSERT_OK(loop.add_fd_watch(efd.fd(), on_signal));
  EventLoopThread thread(std::move(loop));
  ASSERT_OK(thread.start());
  EXPECT_TRUE(thread.running());
  ASSERT_OK(efd.signal());

  auto future = seen.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  const Seen where = future.get();
  EXPECT_NE(where.id, std::this_thread::get_id());
  EXPECT_EQ(where.name, "dsec-io");

  ASSERT_OK(thread.stop());
  EXPECT_FALSE(thread.running());
  ASSERT_OK(thread.stop());  // stopping twice is harmless
}

TEST(EventLoopThread, WatchesSurviveARestartOnANewThread) {
  // The kernel may cancel a task's requests when it exits; the loop arms its watches
  // again from the next thread that runs it.
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  std::atomic<uint64_t> consumed{0};
  auto on_signal = [&] {
    auto n = efd.consume();
    ASSERT_OK(n);
    consumed += *n;
  };
  ASSERT_OK(loop.add_fd_watch(efd.fd(), on_signal));
  bool fired = false;
  ASSERT_OK(loop.add_timer(300ms, [&] { fired = true; }));
  EventLoopThread thread(std::move(loop));
  for (uint64_t round = 1; round <= 3; ++round) {
    ASSERT_OK(thread.start());
    ASSERT_OK(efd.signal());
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (consumed.load() < round && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_EQ(consumed.load(), round) << "round " << round;
    ASSERT_OK(thread.stop());
  }
  // The timer, armed by the first thread, still fires from a later one.
  ASSERT_OK(thread.start());
  ASSERT_OK(thread.stop());
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!fired && std::chrono::steady_clock::now() < deadline) {
    ASSERT_OK(thread.loop().run_once(10ms));
  }
  EXPECT_TRUE(fired);
}

TEST(EventLoopThread, StartTwiceFails) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  EventLoopThread thread(std::move(loop));
  ASSERT_OK(thread.start());
  auto again = thread.start();
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message().find("already running"), std::string::npos);
}

TEST(EventLoopThread, ExitHandlerGetsTheResultOnTheLoopThread) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  EventLoopThread thread(std::move(loop));
  std::promise<bool> exited;
  ASSERT_OK(thread.start([&](const Status& result) { exited.set_value(result.has_value()); }));
  ASSERT_OK(thread.stop());
  auto future = exited.get_future();
  ASSERT_EQ(future.wait_for(0s), std::future_status::ready) << "stop() joined before it ran";
  EXPECT_TRUE(future.get());
}

TEST(EventLoopThread, DestructorStopsAndJoins) {
  ASSERT_OK_AND_ASSIGN(EventLoop loop, EventLoop::create(8));
  auto destroyed = std::async(std::launch::async, [loop = std::move(loop)]() mutable {
    EventLoopThread thread(std::move(loop));
    EXPECT_TRUE(thread.start().has_value());
  });
  ASSERT_EQ(destroyed.wait_for(5s), std::future_status::ready) << "the destructor hung";
}

}  // namespace
}  // namespace dsec::io

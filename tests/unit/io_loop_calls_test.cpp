// Calls into an event loop's thread from others (vmm/io/loop_calls.h).
#include <gtest/gtest.h>

#include <thread>

#include "tests/support/eventually.h"
#include "vmm/io/event_loop_thread.h"
#include "vmm/io/loop_calls.h"

namespace dsec::io {
namespace {

namespace test = dsec::test;

using namespace std::chrono_literals;

TEST(LoopCalls, RunsTheWorkOnTheLoopsThreadAndReturnsItsResult) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.has_value());
  EventLoopThread thread(std::move(*loop));
  auto calls = LoopCalls::create(thread.loop());
  ASSERT_TRUE(calls.has_value()) << calls.error().message();
  ASSERT_TRUE(thread.start().has_value());
  std::thread::id ran_on;
  const auto got = (*calls)->call(
      [&] {
        ran_on = std::this_thread::get_id();
        return 42;
      },
      5s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 42);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  // Many threads at once each get their own answer.
  std::vector<std::thread> callers;
  std::vector<int> answers(8, -1);
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back(
        [&, i] { answers[i] = (*calls)->call([i] { return i * 10; }, 5s).value_or(-2); });
  }
  for (auto& c : callers) c.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(answers[i], i * 10);
  ASSERT_TRUE(thread.stop().has_value());
}

TEST(LoopCalls, ALoopThatDoesNotRunGivesNothingWithinTheTimeoutAndDroppedCallsEndAtOnce) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.has_value());
  auto calls = LoopCalls::create(*loop);
  ASSERT_TRUE(calls.has_value());
  bool ran = false;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE((*calls)
                   ->call(
                       [&] {
                         ran = true;
                         return 1;
                       },
                       100ms)
                   .has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  // A call still queued when the LoopCalls goes ends then, long before its timeout.
  std::optional<int> late = 7;
  std::thread caller([&] { late = (*calls)->call([] { return 2; }, 60s); });
  EXPECT_TRUE(test::eventually([&] { return (*calls)->queued() == 2; }, 10s));
  const auto dropping = std::chrono::steady_clock::now();
  calls->reset();
  caller.join();
  EXPECT_FALSE(late.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - dropping, 10s);
  EXPECT_FALSE(ran) << "the timed-out work ran on a loop that never ran";
}

}  // namespace
}  // namespace dsec::io

// LoopDispatch on a real event loop thread: a notification from another thread is served
// on the loop's thread, under the device's lock, after the device's wake-up work; one from
// a reset's clear() drops what was recorded. (A notification on the loop's own thread,
// served at once, is covered by the virtio-net and virtio-vsock device tests.)
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/devices/virtio/loop_dispatch.h"
#include "vmm/io/event_loop_thread.h"

namespace dsec::virtio {
namespace {

using namespace std::chrono_literals;

class LoopDispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(auto loop, io::EventLoop::create());
    loop_thread_.emplace(std::move(loop));
    ASSERT_OK_AND_ASSIGN(dispatch_,
                         LoopDispatch::create(
                             loop_thread_->loop(), device_mutex_,
                             [this](uint16_t queue) { record("serve " + std::to_string(queue)); },
                             [this] { record("wake"); }));
    ASSERT_OK(loop_thread_->start());
  }
  void TearDown() override {
    // As a device does: the dispatcher goes while the loop is not running.
    EXPECT_TRUE(loop_thread_->stop().has_value());
    dispatch_.reset();
  }

  // The dispatcher's callbacks: which one ran, and on which thread.
  void record(const std::string& what) {
    const std::lock_guard lock(events_mutex_);
    events_.push_back(what + (std::this_thread::get_id() != test_thread_ ? " on the loop"
                                                                         : " on the test thread"));
    changed_.notify_all();
  }
  std::vector<std::string> wait_for(size_t count) {
    std::unique_lock lock(events_mutex_);
    changed_.wait_for(lock, 5s, [&] { return events_.size() >= count; });
    return events_;
  }

  const std::thread::id test_thread_ = std::this_thread::get_id();
  std::mutex device_mutex_;
  std::optional<io::EventLoopThread> loop_thread_;
  std::unique_ptr<LoopDispatch> dispatch_;
  std::mutex events_mutex_;
  std::condition_variable changed_;
  std::vector<std::string> events_;
};

TEST_F(LoopDispatchTest, ANotifyFromAnotherThreadIsServedOnTheLoopAfterTheWakeUpWork) {
  dispatch_->notify(1);
  EXPECT_EQ(wait_for(2), (std::vector<std::string>{"wake on the loop", "serve 1 on the loop"}));
}

TEST_F(LoopDispatchTest, RecordedQueuesAreServedOnceEachInQueueOrder) {
  {
    const std::lock_guard lock(device_mutex_);
    dispatch_->defer(2);
    dispatch_->defer(0);
    dispatch_->defer(2);
  }
  const auto events = wait_for(3);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[1], "serve 0 on the loop");
  EXPECT_EQ(events[2], "serve 2 on the loop");
  std::this_thread::sleep_for(100ms);
  const std::lock_guard lock(events_mutex_);
  for (size_t i = 3; i < events_.size(); ++i) {
    EXPECT_EQ(events_[i], "wake on the loop") << "queue 2 served twice";
  }
}

TEST_F(LoopDispatchTest, ClearForgetsWhatWasRecorded) {
  {
    const std::lock_guard lock(device_mutex_);
    dispatch_->defer(3);
    dispatch_->clear();
  }
  EXPECT_EQ(wait_for(1), (std::vector<std::string>{"wake on the loop"}));
  std::this_thread::sleep_for(100ms);
  const std::lock_guard lock(events_mutex_);
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(LoopDispatchTest, QueuesBeyondTheMaskAreIgnored) {
  dispatch_->notify(LoopDispatch::kMaxQueues);
  dispatch_->notify(0);
  EXPECT_EQ(wait_for(2), (std::vector<std::string>{"wake on the loop", "serve 0 on the loop"}));
}

}  // namespace
}  // namespace dsec::virtio

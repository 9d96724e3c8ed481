// The virtio-net unit tests' fixture: a device on a SOCK_SEQPACKET socket pair standing in
// for the TAP (one frame per read and write, like a TAP), its two queues driven as a guest
// driver drives them, and the event loop turned by hand.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/virtq_driver.h"
#include "vmm/devices/virtio/net/net.h"
#include "vmm/io/event_loop.h"

namespace dsec::virtio {

using testing::DriverQueue;
using testing::kNext;
using testing::kWrite;
using testing::QueueLayout;
using UsedElem = DriverQueue::UsedElem;

inline constexpr uint64_t kMiB = 1 << 20;
inline constexpr uint64_t kBuf = 0x10000;
inline constexpr MacAddress kMac{0x52, 0x54, 0x00, 0xab, 0xcd, 0xef};

inline GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, 1 * kMiB}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

inline std::vector<uint8_t> frame_of(size_t size, uint8_t seed) {
  std::vector<uint8_t> frame(size);
  for (size_t i = 0; i < size; ++i) frame[i] = static_cast<uint8_t>(seed + i);
  return frame;
}

class VirtioNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(memory_.fill(0, 1 * kMiB, 0));
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    peer_.reset(fds[1]);
    auto device =
        VirtioNet::create_on_fd(UniqueFd(fds[0]), kMac, memory_, loop_, limiters_, format_);
    ASSERT_OK(device);
    net_ = std::move(*device);
    queues_.push_back(VirtQueue::create(VirtioNet::kQueueSize).value());
    queues_.push_back(VirtQueue::create(VirtioNet::kQueueSize).value());
    queues_[0].state() = rx_.queue_state(false, true);
    queues_[1].state() = tx_.queue_state(false, true);
    ASSERT_OK(queues_[0].validate(memory_));
    ASSERT_OK(queues_[1].validate(memory_));
    ASSERT_OK(net_->activate(queues_, driver_features(), interrupt_));
    pump();
  }
  void TearDown() override {
    if (net_) net_->reset();
    net_.reset();
  }

  // What the guest driver accepts: every feature the device offers, unless a test says less.
  virtual uint64_t driver_features() { return net_->features(); }

  void pump() {
    for (int i = 0; i < 10; ++i) {
      ASSERT_OK(loop_.run_once(std::chrono::milliseconds(5)));
    }
  }
  void send_from_host(const std::vector<uint8_t>& frame) {
    ASSERT_EQ(::send(peer_.get(), frame.data(), frame.size(), 0),
              static_cast<ssize_t>(frame.size()));
  }
  // Turns the loop until `done` holds; false if not within 5 s.
  template <typename Done>
  bool turn_until(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline ||
          !loop_.run_once(std::chrono::milliseconds(10))) {
        return false;
      }
    }
    return true;
  }
  std::vector<uint8_t> bytes_at(uint64_t gpa, uint64_t len) {
    std::vector<uint8_t> out(len);
    EXPECT_TRUE(memory_.read(gpa, out).has_value());
    return out;
  }

  GuestMemory memory_ = make_memory();
  io::EventLoop loop_ = std::move(io::EventLoop::create().value());
  DriverQueue rx_{memory_, QueueLayout{.size = 8, .desc = 0x1000, .avail = 0x2000, .used = 0x3000}};
  DriverQueue tx_{memory_, QueueLayout{.size = 8, .desc = 0x4000, .avail = 0x5000, .used = 0x6000}};
  std::vector<VirtQueue> queues_;
  int raised_ = 0;
  std::shared_ptr<VirtioInterrupt> interrupt_ =
      std::make_shared<VirtioInterrupt>([this](bool raised) { raised_ += raised ? 1 : 0; });
  UniqueFd peer_;
  NetRateLimiters limiters_;  // what SetUp() creates the device with
  FrameFormat format_;
  std::unique_ptr<VirtioNet> net_;
};

}  // namespace dsec::virtio

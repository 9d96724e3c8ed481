// The VM's event-loop thread: owns an EventLoop, runs it on a thread of its own between
// start() and stop(), and never outlives its owner (the destructor stops and joins).
#pragma once

#include <functional>
#include <thread>

#include "vmm/common/error.h"
#include "vmm/io/event_loop.h"

namespace dsec::io {

class EventLoopThread {
 public:
  // Called on the loop thread as it ends, with run()'s result: an error means the loop
  // died while the VM still needed it, and its owner should stop the VM.
  using ExitHandler = std::move_only_function<void(const Status& result)>;
  // Called first on the new thread, before the loop runs (its seccomp filter goes in
  // here). An error ends the thread at once: run()'s result is that error.
  using ThreadStart = std::move_only_function<Status()>;

  explicit EventLoopThread(EventLoop loop) : loop_(std::move(loop)) {}
  EventLoopThread(const EventLoopThread&) = delete;
  EventLoopThread& operator=(const EventLoopThread&) = delete;
  ~EventLoopThread();  // stops and joins

  // Register devices' watches here before start(); while the thread runs, the loop is
  // the loop thread's alone (see EventLoop) except for stop().
  EventLoop& loop() { return loop_; }

  // Starts the thread, named "dsec-io", running `setup` and then loop().run(). Fails if it
  // is running or the thread cannot be created.
  Status start(ExitHandler on_exit = {}, ThreadStart setup = {});
  // Stops the loop and joins the thread; returns run()'s result. Does nothing (and
  // succeeds) when not running.
  Status stop();
  bool running() const { return thread_.joinable(); }

 private:
  EventLoop loop_;
  std::thread thread_;
  Status result_;
};

}  // namespace dsec::io

#include "vmm/io/event_loop_thread.h"

#include <pthread.h>

#include <system_error>

namespace dsec::io {

EventLoopThread::~EventLoopThread() {
  static_cast<void>(stop());
}

Status EventLoopThread::start(ExitHandler on_exit, ThreadStart setup) {
  if (running()) {
    return fail("event loop thread: already running");
  }
  result_ = ok();
  try {
    thread_ = std::thread([this, on_exit = std::move(on_exit), setup = std::move(setup)]() mutable {
      // The name shows in ps and /proc, and tells this thread's role apart from vCPUs'.
      pthread_setname_np(pthread_self(), "dsec-io");
      result_ = setup ? setup() : ok();
      if (result_) {
        result_ = loop_.run();
      }
      if (on_exit) {
        on_exit(result_);
      }
    });
  } catch (const std::system_error& e) {
    return fail_errno("event loop thread: cannot create it", e.code().value());
  }
  return ok();
}

Status EventLoopThread::stop() {
  if (!running()) {
    return ok();
  }
  loop_.stop();
  thread_.join();
  return result_;
}

}  // namespace dsec::io

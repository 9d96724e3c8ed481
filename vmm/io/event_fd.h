// RAII eventfd: the doorbell between KVM and the event loop (ioeventfd for queue
// notifications, irqfd for interrupts) and the loop's own wake-up signal.
#pragma once

#include <sys/eventfd.h>

#include <cstdint>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::io {

class EventFd {
 public:
  // Non-blocking by default: a handler drains the counter and must never sleep on it.
  static Result<EventFd> create(unsigned initial_value = 0, int flags = EFD_CLOEXEC | EFD_NONBLOCK);

  int fd() const { return fd_.get(); }

  // Adds `count` to the counter (a write). Fails with EAGAIN only when a non-blocking
  // counter would overflow, i.e. it is already signalled more than anyone can consume.
  Status signal(uint64_t count = 1) const;
  // Reads and resets the counter (in EFD_SEMAPHORE mode, takes 1 from it instead).
  // Returns 0 when a non-blocking eventfd has nothing to consume.
  Result<uint64_t> consume() const;

 private:
  explicit EventFd(UniqueFd fd) : fd_(std::move(fd)) {}

  UniqueFd fd_;
};

}  // namespace dsec::io

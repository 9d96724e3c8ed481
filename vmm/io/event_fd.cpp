#include "vmm/io/event_fd.h"

#include <unistd.h>

#include <cerrno>

namespace dsec::io {

Result<EventFd> EventFd::create(unsigned initial_value, int flags) {
  UniqueFd fd(::eventfd(initial_value, flags));
  if (!fd) {
    return fail_errno("eventfd", errno, "is the process out of file descriptors (RLIMIT_NOFILE)?");
  }
  return EventFd(std::move(fd));
}

Status EventFd::signal(uint64_t count) const {
  for (;;) {
    if (::write(fd_.get(), &count, sizeof(count)) == sizeof(count)) {
      return ok();
    }
    if (errno != EINTR) {
      return fail_errno("eventfd write", errno);
    }
  }
}

Result<uint64_t> EventFd::consume() const {
  for (;;) {
    uint64_t value = 0;
    if (::read(fd_.get(), &value, sizeof(value)) == sizeof(value)) {
      return value;
    }
    if (errno == EAGAIN) {
      return 0;
    }
    if (errno != EINTR) {
      return fail_errno("eventfd read", errno);
    }
  }
}

}  // namespace dsec::io

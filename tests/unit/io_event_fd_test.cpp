// EventFd: the counter semantics devices rely on, and that the fd is owned.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "tests/support/result_matchers.h"
#include "vmm/io/event_fd.h"

namespace dsec::io {
namespace {

TEST(EventFd, ConsumeReturnsTheSumOfSignalsAndResetsIt) {
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  ASSERT_OK(efd.signal());
  ASSERT_OK(efd.signal(41));
  ASSERT_OK_AND_ASSIGN(uint64_t first, efd.consume());
  EXPECT_EQ(first, 42u);
  ASSERT_OK_AND_ASSIGN(uint64_t second, efd.consume());
  EXPECT_EQ(second, 0u) << "a drained non-blocking eventfd reads as nothing pending";
}

TEST(EventFd, InitialValueAndSemaphoreMode) {
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create(2, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE));
  ASSERT_OK_AND_ASSIGN(uint64_t a, efd.consume());
  ASSERT_OK_AND_ASSIGN(uint64_t b, efd.consume());
  ASSERT_OK_AND_ASSIGN(uint64_t c, efd.consume());
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(c, 0u);
}

TEST(EventFd, IsCloseOnExecAndClosedWhenDestroyed) {
  int fd = -1;
  {
    ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
    fd = efd.fd();
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    EventFd moved = std::move(efd);
    EXPECT_EQ(moved.fd(), fd);
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST(EventFd, SignalOfAFullCounterFailsWithEagain) {
  ASSERT_OK_AND_ASSIGN(EventFd efd, EventFd::create());
  ASSERT_OK(efd.signal(UINT64_MAX - 1));  // the counter's maximum
  auto full = efd.signal(1);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().os_errno(), EAGAIN);
  EXPECT_NE(full.error().message().find("eventfd write"), std::string::npos);
}

}  // namespace
}  // namespace dsec::io

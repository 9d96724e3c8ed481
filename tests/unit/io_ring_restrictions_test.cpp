// A ring restricted to the event loop's operations (vmm/io/ring_restrictions.h) runs them
// and refuses any other: what seccomp cannot see, since io_uring operations are not system
// calls.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vmm/io/ring_restrictions.h"

namespace dsec::io {
namespace {

class RestrictedRing : public ::testing::Test {
 protected:
  void SetUp() override {
    io_uring_params params{};
    params.flags = IORING_SETUP_R_DISABLED;
    ASSERT_EQ(io_uring_queue_init_params(8, &ring_, &params), 0);
    ready_ = true;
    const auto restricted = restrict_to_loop_operations(ring_);
    ASSERT_TRUE(restricted.has_value()) << restricted.error().message();
  }
  void TearDown() override {
    if (ready_) {
      io_uring_queue_exit(&ring_);
    }
  }

  // Submits what `prepare` puts in one SQE and returns its CQE's result.
  template <typename Prepare>
  int run_one(Prepare prepare) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    EXPECT_NE(sqe, nullptr);
    prepare(sqe);
    EXPECT_EQ(io_uring_submit(&ring_), 1);
    io_uring_cqe* cqe = nullptr;
    EXPECT_EQ(io_uring_wait_cqe(&ring_, &cqe), 0);
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res;
  }

  io_uring ring_{};
  bool ready_ = false;
};

TEST_F(RestrictedRing, RunsTheLoopsOperations) {
  const int event = ::eventfd(1, EFD_CLOEXEC);
  ASSERT_GE(event, 0);
  EXPECT_EQ(run_one([&](io_uring_sqe* sqe) { io_uring_prep_poll_add(sqe, event, POLLIN); }),
            POLLIN);
  ::close(event);
}

TEST_F(RestrictedRing, RefusesEveryOtherOperationAndRegistration) {
  EXPECT_EQ(run_one([](io_uring_sqe* sqe) { io_uring_prep_nop(sqe); }), -EACCES);
  EXPECT_EQ(run_one([](io_uring_sqe* sqe) {
              io_uring_prep_openat(sqe, AT_FDCWD, "/etc/hostname", O_RDONLY, 0);
            }),
            -EACCES);
  EXPECT_EQ(
      run_one([](io_uring_sqe* sqe) { io_uring_prep_socket(sqe, AF_INET, SOCK_STREAM, 0, 0); }),
      -EACCES);
  // A loop operation with a submission flag the loop never sets.
  const int event = ::eventfd(1, EFD_CLOEXEC);
  ASSERT_GE(event, 0);
  EXPECT_EQ(run_one([&](io_uring_sqe* sqe) {
              io_uring_prep_poll_add(sqe, event, POLLIN);
              io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
            }),
            -EACCES);
  // No registration once enabled: files, buffers, or new restrictions.
  EXPECT_EQ(io_uring_register_files(&ring_, &event, 1), -EACCES);
  ::close(event);
}

}  // namespace
}  // namespace dsec::io

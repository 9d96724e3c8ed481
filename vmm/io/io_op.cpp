#include "vmm/io/io_op.h"

namespace dsec::io {

void IoOp::reset() {
  std::vector<iovec> keep = std::move(iovecs);
  keep.clear();
  *this = IoOp{};
  iovecs = std::move(keep);
}

void prepare_sqe(io_uring_sqe* sqe, IoOp& op, uint64_t key) {
  switch (op.kind) {
    case IoOpKind::kWatch:
      if (op.multishot) {
        io_uring_prep_poll_multishot(sqe, op.fd, op.poll_events);
      } else {
        io_uring_prep_poll_add(sqe, op.fd, op.poll_events);
      }
      break;
    case IoOpKind::kRead:
      io_uring_prep_readv(sqe, op.fd, op.iovecs.data(), static_cast<unsigned>(op.iovecs.size()),
                          op.offset);
      break;
    case IoOpKind::kWrite:
      io_uring_prep_writev(sqe, op.fd, op.iovecs.data(), static_cast<unsigned>(op.iovecs.size()),
                           op.offset);
      break;
    case IoOpKind::kFsync:
      io_uring_prep_fsync(sqe, op.fd, op.datasync ? IORING_FSYNC_DATASYNC : 0);
      break;
    case IoOpKind::kTimer:
      io_uring_prep_timeout(sqe, &op.deadline, 0, IORING_TIMEOUT_ABS);
      break;
  }
  io_uring_sqe_set_data64(sqe, key);
}

}  // namespace dsec::io

// The io_uring operations an EventLoop submits, and a ring restricted to them. io_uring
// operations are not system calls, so a thread's seccomp filter (vmm/seccomp) never sees
// them: a thread that may call io_uring_enter could otherwise have its ring open files or
// connect sockets. A restricted ring (Linux 5.10) fails any other operation with EACCES,
// and refuses every io_uring_register call once enabled.
#pragma once

#include <liburing.h>

#include <array>

#include "vmm/common/error.h"

namespace dsec::io {

// What io_op.cpp prepares (polls, readv, writev, fsync, timeouts) and the loop's
// cancellations.
inline constexpr std::array<io_uring_op, 6> kLoopRingOperations = {
    IORING_OP_POLL_ADD, IORING_OP_READV,   IORING_OP_WRITEV,
    IORING_OP_FSYNC,    IORING_OP_TIMEOUT, IORING_OP_ASYNC_CANCEL};

// Restricts `ring`, created with IORING_SETUP_R_DISABLED, to kLoopRingOperations (no
// submission flags) and enables it.
Status restrict_to_loop_operations(io_uring& ring);

}  // namespace dsec::io

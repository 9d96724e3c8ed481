// One operation of the event loop as the ring sees it: what to submit, and what to call
// when the kernel answers. Records live in a SlotTable; their keys are the SQEs' user_data.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace dsec::io {

enum class IoOpKind : uint8_t { kWatch, kRead, kWrite, kFsync, kTimer };

// Reads, writes and fsyncs: operations that each end in exactly one completion.
inline bool is_file_io(IoOpKind kind) {
  return kind == IoOpKind::kRead || kind == IoOpKind::kWrite || kind == IoOpKind::kFsync;
}

struct IoOp {
  IoOpKind kind = IoOpKind::kWatch;
  // Kernel and queue state. A record is freed once it is cancelled (or, for I/O and
  // timers, completed) and none of armed, queued and in_handler holds.
  bool armed = false;        // an SQE with this key is in the ring; its last CQE is to come
  bool queued = false;       // waiting in the loop's backlog for room in the ring
  bool in_handler = false;   // its watch handler is running (it may remove itself)
  bool cancelled = false;    // removed by its owner: its callback is never called again
  bool multishot = false;    // a watch armed with IORING_POLL_ADD_MULTI
  uint64_t fired_batch = 0;  // the completion batch that last called a watch's handler

  int fd = -1;
  uint32_t poll_events = 0;
  uint64_t offset = 0;
  bool datasync = false;
  // The kernel reads these when the SQE is submitted, which may be after the call that
  // queued them returned; the record (at a stable address in its SlotTable) owns them.
  std::vector<iovec> iovecs;
  __kernel_timespec deadline{};  // CLOCK_MONOTONIC, absolute

  std::move_only_function<void()> handler;                   // watches and timers
  std::move_only_function<void(int32_t result)> completion;  // reads, writes, fsyncs

  // Ready for reuse; keeps the iovec vector's capacity.
  void reset();
};

// Fills `sqe` to start `op`, with `key` as its user_data.
void prepare_sqe(io_uring_sqe* sqe, IoOp& op, uint64_t key);

}  // namespace dsec::io

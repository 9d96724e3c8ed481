#include "vmm/io/ring_restrictions.h"

namespace dsec::io {

Status restrict_to_loop_operations(io_uring& ring) {
  std::array<io_uring_restriction, kLoopRingOperations.size() + 1> restrictions{};
  for (size_t i = 0; i < kLoopRingOperations.size(); ++i) {
    restrictions[i].opcode = IORING_RESTRICTION_SQE_OP;
    restrictions[i].sqe_op = static_cast<uint8_t>(kLoopRingOperations[i]);
  }
  // No submission flags (IOSQE_*) either: the loop sets none.
  restrictions.back().opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
  restrictions.back().sqe_flags = 0;
  if (const int r = io_uring_register_restrictions(&ring, restrictions.data(),
                                                   static_cast<unsigned>(restrictions.size()));
      r < 0) {
    return fail_errno("io_uring: restricting the ring to the event loop's operations", -r);
  }
  if (const int r = io_uring_enable_rings(&ring); r < 0) {
    return fail_errno("io_uring: enabling the restricted ring", -r);
  }
  return ok();
}

}  // namespace dsec::io

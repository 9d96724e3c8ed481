/* The hostile guest's script: what the host test writes (as the guest's initrd) and the
 * guest (guest.c) executes. Shared by the freestanding C guest and the C++ tests, so plain
 * C. All fields are little-endian, as both sides are x86-64.
 *
 * Layout: a header, `op_count` ops of 64 bytes, then a blob of bytes (label texts, data to
 * copy into guest RAM) that ops refer to by offset from the blob's start. */
#ifndef DSEC_TESTS_HOSTILE_GUEST_SCRIPT_OPS_H
#define DSEC_TESTS_HOSTILE_GUEST_SCRIPT_OPS_H

#include <stdint.h>

#define HOSTILE_SCRIPT_MAGIC 0x31454c4954534f48ULL /* "HOSTILE1" */

/* The lines the guest prints on its serial port (COM1). */
#define HOSTILE_PASS_LINE "hostile: PASS"
#define HOSTILE_FAIL_PREFIX "hostile: FAIL"

struct hostile_script_header {
  uint64_t magic;
  uint32_t op_count;
  uint32_t blob_offset; /* from the start of the script */
};

enum hostile_op_code {
  /* The script ends here: the guest prints the pass line and reboots (dsec-vmm exits 0). */
  HOSTILE_OP_END = 0,
  /* Prints "hostile: <text>"; the text (NUL-terminated) is at blob offset `arg`. It also
   * names the step in a later failure. */
  HOSTILE_OP_LABEL = 1,
  /* Writes the low `width` bytes of `value` at `addr`, `count` times (0 means once), the
   * i-th at addr + i * stride: a stride of 0 floods one address. `addr` may be RAM or any
   * device. */
  HOSTILE_OP_WRITE = 2,
  /* Reads `width` bytes at addr + i * stride, `count` times (0 means once); the values
   * are dropped. */
  HOSTILE_OP_READ = 3,
  /* Reads `width` bytes at `addr`; fails unless (read & mask) == value. */
  HOSTILE_OP_EXPECT = 4,
  /* Fails if (read & mask) == value. */
  HOSTILE_OP_EXPECT_NOT = 5,
  /* Reads `addr` until (read & mask) == value, for at most `arg` milliseconds of PIT time
   * (0: HOSTILE_DEFAULT_WAIT_MS); then fails. */
  HOSTILE_OP_WAIT = 6,
  /* As WAIT, until any of `count` locations addr + i * stride matches. */
  HOSTILE_OP_WAIT_ANY = 7,
  /* Sets `count` bytes of RAM from `addr` to the low byte of `value`. */
  HOSTILE_OP_FILL = 8,
  /* Copies `count` bytes from blob offset `arg` to RAM at `addr`. */
  HOSTILE_OP_COPY = 9,
  /* Spins for `arg` milliseconds of PIT time: room for a device to do what it must not. */
  HOSTILE_OP_DELAY = 10,
  /* As WAIT, until (read & mask) != value: until something moved. */
  HOSTILE_OP_WAIT_NOT = 11,
};

#define HOSTILE_DEFAULT_WAIT_MS 5000

/* Width 16 (EXPECT, EXPECT_NOT, WAIT, WAIT_ANY): two 8-byte reads, at addr against value
 * and mask, at addr + 8 against value_hi and mask_hi; both must match. */
struct hostile_op {
  uint32_t code;  /* enum hostile_op_code */
  uint32_t width; /* 1, 2, 4, 8 or 16 */
  uint64_t addr;
  uint64_t value;
  uint64_t mask;
  uint64_t value_hi;
  uint64_t mask_hi;
  uint32_t count;
  uint32_t stride;
  uint64_t arg;
};

#endif /* DSEC_TESTS_HOSTILE_GUEST_SCRIPT_OPS_H */

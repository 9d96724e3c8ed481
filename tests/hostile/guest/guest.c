/* The hostile guest: a freestanding x86-64 program that dsec-vmm boots as its kernel (an
 * ELF with a 64-bit entry) and that runs the script the host test passed as its initrd
 * (script_ops.h). The attacks are in the script; this is only an interpreter of MMIO and
 * RAM accesses, bounded waits and a pass/fail verdict, so that one binary serves every
 * test. It prints on COM1 and ends by rebooting through the i8042 when the script passes
 * (dsec-vmm exits 0), or by a triple fault when a step fails (dsec-vmm exits 2).
 *
 * Time comes from the in-kernel PIT's channel 2 (1.193182 MHz), free-running with its
 * gate on and no interrupt: every wait is bounded in real time, whatever a device does. */
#include <stddef.h>
#include <stdint.h>

#include "script_ops.h"

/* The Linux 64-bit boot protocol: RSI holds the zero page, and the initrd's address and size
 * sit in its setup header (Documentation/arch/x86/boot.rst). */
#define ZERO_PAGE_RAMDISK_IMAGE 0x218
#define ZERO_PAGE_RAMDISK_SIZE 0x21c

#define COM1 0x3f8
#define I8042_COMMAND 0x64
#define I8042_RESET 0xfe
#define BOOT_TIMER_PORT 0x440
#define PIT_CHANNEL2 0x42
#define PIT_COMMAND 0x43
#define PIT_GATE_PORT 0x61
#define PIT_HZ 1193182u

/* The boot page tables map only the first GiB; the devices sit at 3 GiB. */
static uint64_t pml4[512] __attribute__((aligned(4096)));
static uint64_t pdpt[512] __attribute__((aligned(4096)));
static uint64_t page_dirs[4][512] __attribute__((aligned(4096)));
uint8_t guest_stack[16384] __attribute__((aligned(16), used));

__asm__(
    ".section .text.entry, \"ax\"\n"
    ".global _start\n"
    "_start:\n"
    "  lea guest_stack+16384(%rip), %rsp\n"
    "  mov %rsi, %rdi\n"
    "  call guest_main\n"
    "1: hlt\n"
    "  jmp 1b\n"
    ".text\n");

/* The compiler may call these for struct copies and loops, even freestanding. */
void* memset(void* dst, int c, size_t n) {
  uint8_t* d = dst;
  while (n-- != 0) *d++ = (uint8_t)c;
  return dst;
}
void* memcpy(void* dst, const void* src, size_t n) {
  uint8_t* d = dst;
  const uint8_t* s = src;
  while (n-- != 0) *d++ = *s++;
  return dst;
}

static inline void outb(uint16_t port, uint8_t value) {
  __asm__ volatile("outb %0, %1" : : "a"(value), "Nd"(port));
}
static inline uint8_t inb(uint16_t port) {
  uint8_t value;
  __asm__ volatile("inb %1, %0" : "=a"(value) : "Nd"(port));
  return value;
}

static void put_char(char c) {
  outb(COM1, (uint8_t)c);
}
static void put_str(const char* s) {
  while (*s != 0) put_char(*s++);
}
static void put_hex(uint64_t v) {
  put_str("0x");
  for (int shift = 60; shift >= 0; shift -= 4) put_char("0123456789abcdef"[(v >> shift) & 0xf]);
}
static void put_dec(uint64_t v) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) put_char(digits[--n]);
}

/* ---- Time: PIT channel 2, mode 2, reload 65536, counting down. */
static uint64_t pit_ticks;
static uint16_t pit_last;

static uint16_t pit_read(void) {
  outb(PIT_COMMAND, 0x80); /* latch channel 2 */
  const uint8_t lo = inb(PIT_CHANNEL2);
  const uint8_t hi = inb(PIT_CHANNEL2);
  return (uint16_t)(lo | hi << 8);
}

/* Milliseconds since clock_start(). Called at least every 55 ms (one period) by every
 * loop that waits, so that no wrap of the counter goes unseen. */
static uint64_t clock_ms(void) {
  const uint16_t now = pit_read();
  pit_ticks += (uint16_t)(pit_last - now);
  pit_last = now;
  return pit_ticks * 1000 / PIT_HZ;
}

static void fail_now(void) __attribute__((noreturn));

static void clock_start(void) {
  outb(PIT_GATE_PORT, (uint8_t)((inb(PIT_GATE_PORT) & ~0x02) | 0x01)); /* gate on, speaker off */
  outb(PIT_COMMAND, 0xb4); /* channel 2, low then high byte, mode 2, binary */
  outb(PIT_CHANNEL2, 0);
  outb(PIT_CHANNEL2, 0);
  pit_last = pit_read();
  for (uint32_t i = 0; i < 1000000; ++i) {
    if (pit_read() != pit_last) {
      pit_last = pit_read();
      return;
    }
  }
  put_str(HOSTILE_FAIL_PREFIX " the PIT does not count: no wait could be bounded\n");
  fail_now();
}

/* ---- Ending. */
static void reboot(void) __attribute__((noreturn));
static void reboot(void) {
  outb(I8042_COMMAND, I8042_RESET);
  for (;;) __asm__ volatile("hlt");
}

/* A triple fault: an empty IDT, then an exception. dsec-vmm reports the guest crashed. */
static void fail_now(void) {
  const struct __attribute__((packed)) {
    uint16_t limit;
    uint64_t base;
  } empty_idt = {0, 0};
  __asm__ volatile("lidt %0\n\tint3" : : "m"(empty_idt));
  for (;;) __asm__ volatile("hlt");
}

/* ---- Memory and device accesses of the script's width. */
static uint64_t read_at(uint64_t addr, uint32_t width) {
  switch (width) {
    case 1:
      return *(volatile uint8_t*)addr;
    case 2:
      return *(volatile uint16_t*)addr;
    case 4:
      return *(volatile uint32_t*)addr;
    default:
      return *(volatile uint64_t*)addr;
  }
}

static void write_at(uint64_t addr, uint32_t width, uint64_t value) {
  switch (width) {
    case 1:
      *(volatile uint8_t*)addr = (uint8_t)value;
      break;
    case 2:
      *(volatile uint16_t*)addr = (uint16_t)value;
      break;
    case 4:
      *(volatile uint32_t*)addr = (uint32_t)value;
      break;
    default:
      *(volatile uint64_t*)addr = value;
      break;
  }
  /* Ring entries before the index, and the index before a notify (2.7.13). */
  __asm__ volatile("mfence" ::: "memory");
}

static void map_four_gib(void) {
  for (uint64_t gib = 0; gib < 4; ++gib) {
    for (uint64_t i = 0; i < 512; ++i) {
      /* present, writable, 2 MiB; the device GiB uncached */
      page_dirs[gib][i] = ((gib * 512 + i) << 21) | 0x83 | (gib == 3 ? 0x18 : 0);
    }
    pdpt[gib] = (uint64_t)page_dirs[gib] | 0x3;
  }
  pml4[0] = (uint64_t)pdpt | 0x3;
  __asm__ volatile("mov %0, %%cr3" : : "r"((uint64_t)pml4) : "memory");
}

/* ---- The interpreter. */
static const char* current_label = "(before the first label)";

static void fail_op(uint32_t index, const struct hostile_op* op, const char* what, uint64_t seen)
    __attribute__((noreturn));
static void fail_op(uint32_t index, const struct hostile_op* op, const char* what, uint64_t seen) {
  put_str(HOSTILE_FAIL_PREFIX " at op ");
  put_dec(index);
  put_str(" (");
  put_str(current_label);
  put_str("): ");
  put_str(what);
  put_str(" at ");
  put_hex(op->addr);
  put_str(": read ");
  put_hex(seen);
  put_str(", wanted ");
  put_hex(op->value);
  put_str(" under mask ");
  put_hex(op->mask);
  put_str("\n");
  fail_now();
}

static uint64_t repeat_count(const struct hostile_op* op) {
  return op->count == 0 ? 1 : op->count;
}

/* Whether the value at `addr` matches the op's (both halves for width 16); `seen` gets
 * what was read (its low half). */
static int matches_at(const struct hostile_op* op, uint64_t addr, uint64_t* seen) {
  *seen = read_at(addr, op->width == 16 ? 8 : op->width);
  if ((*seen & op->mask) != op->value) return 0;
  return op->width != 16 || (read_at(addr + 8, 8) & op->mask_hi) == op->value_hi;
}

static int any_matches(const struct hostile_op* op, uint64_t* seen) {
  for (uint64_t i = 0; i < repeat_count(op); ++i) {
    if (matches_at(op, op->addr + i * op->stride, seen)) return 1;
  }
  return 0;
}

static void run_op(uint32_t index, const struct hostile_op* op, const uint8_t* blob) {
  uint64_t seen = 0;
  switch (op->code) {
    case HOSTILE_OP_LABEL:
      current_label = (const char*)(blob + op->arg);
      put_str("hostile: ");
      put_str(current_label);
      put_str("\n");
      return;
    case HOSTILE_OP_WRITE:
      for (uint64_t i = 0; i < repeat_count(op); ++i) {
        write_at(op->addr + i * op->stride, op->width, op->value);
      }
      return;
    case HOSTILE_OP_READ:
      for (uint64_t i = 0; i < repeat_count(op); ++i)
        (void)read_at(op->addr + i * op->stride, op->width);
      return;
    case HOSTILE_OP_EXPECT:
      if (!matches_at(op, op->addr, &seen)) fail_op(index, op, "unexpected value", seen);
      return;
    case HOSTILE_OP_EXPECT_NOT:
      if (matches_at(op, op->addr, &seen)) fail_op(index, op, "forbidden value", seen);
      return;
    case HOSTILE_OP_WAIT:
    case HOSTILE_OP_WAIT_ANY:
    case HOSTILE_OP_WAIT_NOT: {
      const uint64_t limit = op->arg != 0 ? op->arg : HOSTILE_DEFAULT_WAIT_MS;
      const uint64_t start = clock_ms();
      const int until = op->code != HOSTILE_OP_WAIT_NOT;
      while (any_matches(op, &seen) != until) {
        if (clock_ms() - start > limit) fail_op(index, op, "timed out waiting", seen);
        __asm__ volatile("pause");
      }
      return;
    }
    case HOSTILE_OP_FILL:
      memset((void*)op->addr, (int)(op->value & 0xff), op->count);
      __asm__ volatile("mfence" ::: "memory");
      return;
    case HOSTILE_OP_COPY:
      memcpy((void*)op->addr, blob + op->arg, op->count);
      __asm__ volatile("mfence" ::: "memory");
      return;
    case HOSTILE_OP_DELAY: {
      const uint64_t start = clock_ms();
      while (clock_ms() - start < op->arg) __asm__ volatile("pause");
      return;
    }
    default:
      fail_op(index, op, "unknown op code", op->code);
  }
}

void guest_main(const uint8_t* zero_page) __attribute__((noreturn, used));
void guest_main(const uint8_t* zero_page) {
  outb(BOOT_TIMER_PORT, 0x7b); /* "userspace is up": the boot timer's first mark */
  map_four_gib();
  clock_start();
  const uint8_t* script =
      (const uint8_t*)(uint64_t)(*(const uint32_t*)(zero_page + ZERO_PAGE_RAMDISK_IMAGE));
  const uint32_t script_size = *(const uint32_t*)(zero_page + ZERO_PAGE_RAMDISK_SIZE);
  const struct hostile_script_header* header = (const struct hostile_script_header*)script;
  if (script_size < sizeof(*header) || header->magic != HOSTILE_SCRIPT_MAGIC ||
      header->blob_offset > script_size ||
      (uint64_t)header->op_count * sizeof(struct hostile_op) >
          header->blob_offset - sizeof(*header)) {
    put_str(HOSTILE_FAIL_PREFIX " the initrd is no hostile script\n");
    fail_now();
  }
  const struct hostile_op* ops = (const struct hostile_op*)(script + sizeof(*header));
  const uint8_t* blob = script + header->blob_offset;
  for (uint32_t i = 0; i < header->op_count; ++i) {
    if (ops[i].code == HOSTILE_OP_END) {
      put_str(HOSTILE_PASS_LINE " after ");
      put_dec(i);
      put_str(" ops\n");
      outb(BOOT_TIMER_PORT, 0x7c); /* a clean reboot */
      reboot();
    }
    run_op(i, &ops[i], blob);
  }
  put_str(HOSTILE_FAIL_PREFIX " the script has no END op\n");
  fail_now();
}

// The host test's side of the hostile guest's script (guest/script_ops.h): ops
// appended one by one, then the bytes the guest gets as its initrd. The guest runs them in
// order and fails at the first expectation that does not hold.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tests/hostile/guest/script_ops.h"

namespace dsec::test::hostile {

static_assert(sizeof(hostile_op) == 64 && sizeof(hostile_script_header) == 16);

inline constexpr uint64_t kAllBits = std::numeric_limits<uint64_t>::max();

class Script {
 public:
  // Names what follows, in the guest's output and in any failure after it.
  void label(std::string_view text) {
    hostile_op op = make(HOSTILE_OP_LABEL, 1, 0, 0);
    op.arg = add_blob(text);
    blob_.push_back(0);
    ops_.push_back(op);
  }
  // `count` writes of `value`, the i-th at addr + i * stride (stride 0: a flood).
  void write(uint64_t addr, uint64_t value, uint32_t width = 4, uint32_t count = 1,
             uint32_t stride = 0) {
    hostile_op op = make(HOSTILE_OP_WRITE, width, addr, value);
    op.count = count;
    op.stride = stride;
    ops_.push_back(op);
  }
  void read(uint64_t addr, uint32_t width = 4, uint32_t count = 1, uint32_t stride = 0) {
    hostile_op op = make(HOSTILE_OP_READ, width, addr, 0);
    op.count = count;
    op.stride = stride;
    ops_.push_back(op);
  }
  void expect(uint64_t addr, uint64_t value, uint32_t width = 4, uint64_t mask = kAllBits) {
    ops_.push_back(masked(HOSTILE_OP_EXPECT, width, addr, value, mask));
  }
  void expect_not(uint64_t addr, uint64_t value, uint32_t width = 4, uint64_t mask = kAllBits) {
    ops_.push_back(masked(HOSTILE_OP_EXPECT_NOT, width, addr, value, mask));
  }
  // Waits until (value at addr & mask) == value, for at most `timeout_ms` (0: the guest's
  // default).
  void wait(uint64_t addr, uint64_t value, uint32_t width = 4, uint64_t mask = kAllBits,
            uint32_t timeout_ms = 0) {
    hostile_op op = masked(HOSTILE_OP_WAIT, width, addr, value, mask);
    op.arg = timeout_ms;
    ops_.push_back(op);
  }
  // Waits until (value at addr & mask) != value: until it moved.
  void wait_not(uint64_t addr, uint64_t value, uint32_t width = 4, uint64_t mask = kAllBits) {
    ops_.push_back(masked(HOSTILE_OP_WAIT_NOT, width, addr, value, mask));
  }
  // A 16-byte match: the 8 bytes at addr against (value, mask), the next 8 against
  // (value_hi, mask_hi).
  struct Wide {
    uint64_t value;
    uint64_t mask;
    uint64_t value_hi;
    uint64_t mask_hi;
  };
  void expect16(uint64_t addr, const Wide& w) { ops_.push_back(wide(HOSTILE_OP_EXPECT, addr, w)); }
  void wait_any16(uint64_t addr, uint32_t count, uint32_t stride, const Wide& w,
                  uint32_t timeout_ms = 0) {
    hostile_op op = wide(HOSTILE_OP_WAIT_ANY, addr, w);
    op.count = count;
    op.stride = stride;
    op.arg = timeout_ms;
    ops_.push_back(op);
  }
  // Waits until one of `count` locations addr + i * stride matches.
  void wait_any(uint64_t addr, uint32_t count, uint32_t stride, uint64_t value, uint32_t width,
                uint64_t mask = kAllBits, uint32_t timeout_ms = 0) {
    hostile_op op = masked(HOSTILE_OP_WAIT_ANY, width, addr, value, mask);
    op.count = count;
    op.stride = stride;
    op.arg = timeout_ms;
    ops_.push_back(op);
  }
  void fill(uint64_t addr, uint8_t value, uint32_t length) {
    hostile_op op = make(HOSTILE_OP_FILL, 1, addr, value);
    op.count = length;
    ops_.push_back(op);
  }
  void copy(uint64_t addr, std::span<const uint8_t> bytes) {
    hostile_op op = make(HOSTILE_OP_COPY, 1, addr, 0);
    op.count = static_cast<uint32_t>(bytes.size());
    op.arg = add_blob(bytes);
    ops_.push_back(op);
  }
  void delay(uint32_t ms) {
    hostile_op op = make(HOSTILE_OP_DELAY, 1, 0, 0);
    op.arg = ms;
    ops_.push_back(op);
  }

  // The script as the guest reads it, with the END op after everything appended.
  std::vector<uint8_t> bytes() const {
    std::vector<hostile_op> ops = ops_;
    ops.push_back(make(HOSTILE_OP_END, 1, 0, 0));
    const hostile_script_header header{
        .magic = HOSTILE_SCRIPT_MAGIC,
        .op_count = static_cast<uint32_t>(ops.size()),
        .blob_offset = static_cast<uint32_t>(sizeof(header) + ops.size() * sizeof(hostile_op))};
    std::vector<uint8_t> out(header.blob_offset + blob_.size());
    std::memcpy(out.data(), &header, sizeof(header));
    std::memcpy(out.data() + sizeof(header), ops.data(), ops.size() * sizeof(hostile_op));
    std::memcpy(out.data() + header.blob_offset, blob_.data(), blob_.size());
    return out;
  }

 private:
  static hostile_op make(uint32_t code, uint32_t width, uint64_t addr, uint64_t value) {
    hostile_op op{};
    op.code = code;
    op.width = width;
    op.addr = addr;
    op.value = value;
    op.mask = kAllBits;
    op.mask_hi = kAllBits;
    return op;
  }
  static hostile_op masked(uint32_t code, uint32_t width, uint64_t addr, uint64_t value,
                           uint64_t mask) {
    hostile_op op = make(code, width, addr, value);
    op.mask = mask;
    return op;
  }
  static hostile_op wide(uint32_t code, uint64_t addr, const Wide& w) {
    hostile_op op = masked(code, 16, addr, w.value, w.mask);
    op.value_hi = w.value_hi;
    op.mask_hi = w.mask_hi;
    return op;
  }
  uint64_t add_blob(std::string_view text) {
    return add_blob(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  uint64_t add_blob(std::span<const uint8_t> bytes) {
    const uint64_t offset = blob_.size();
    blob_.insert(blob_.end(), bytes.begin(), bytes.end());
    return offset;
  }

  std::vector<hostile_op> ops_;
  std::vector<uint8_t> blob_;
};

}  // namespace dsec::test::hostile

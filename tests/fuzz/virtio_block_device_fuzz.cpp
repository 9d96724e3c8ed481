// libFuzzer target: the virtio-blk device end to end (block.h: the queue, the request
// parser, io_uring reads, writes and flushes on a real file, completions, the in-flight
// limit, resets and quiescing), where virtio_block_fuzz covers the parser alone. The
// fuzzer writes the guest memory (rings, descriptors, requests), sizes the queue and runs
// any sequence of notifications, turns of the loop, resets, quiesce/resume and changes to
// guest memory. Checked, once the loop has drained:
// - no request is left in flight, and unless the driver broke the queue every chain the
//   device took went back to the used ring exactly once;
// - the disk file has its size still;
// - after a reset, a read on clean rings returns the disk's bytes with status OK.
//
// Input: u8 flags (bit 0 EVENT_IDX, bit 1 INDIRECT_DESC), u8 log2 of the queue size,
// u16 length of guest memory contents, the contents, then actions, each a u8 opcode
// (mod 5) and its arguments: 0 notify, 1 a turn of the loop, 2 a device reset and
// activation, 3 a guest memory write (u16 offset, u8 length, the bytes), 4 quiesce then
// (u8 odd) resume.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_queue.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/virtio/block.h"
#include "vmm/io/event_loop.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::UniqueFd;
using dsec::fuzz::check;
using dsec::fuzz::FuzzInput;
namespace virtio = dsec::virtio;
using virtio::VirtioBlock;

constexpr std::array<GuestRange, 2> kRam{{{0, 0x40000}, {0x50000, 0x10000}}};
constexpr uint64_t kFuzzedBytes = 0x20000;  // the fuzzer's part of RAM; the rest is clean
constexpr uint64_t kDesc = 0x0000;
constexpr uint64_t kAvail = 0x1000;
constexpr uint64_t kUsed = 0x2000;
constexpr uint64_t kClean = 0x30000;
constexpr uint64_t kDiskBytes = 64 * 512;

uint8_t disk_byte(uint64_t i) {
  return static_cast<uint8_t>(i * 13 + i / 512);
}

struct Harness {
  Harness() {
    char path[] = "/tmp/dsec-fuzz-disk-XXXXXX";
    disk = UniqueFd(::mkostemp(path, O_CLOEXEC));
    check(static_cast<bool>(disk));
    disk_path = path;
    restore_disk();
    GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
    block = std::move(VirtioBlock::create(disk_path, {}, mem, loop).value());
    queues.push_back(virtio::VirtQueue::create(virtio::kBlockQueueSize).value());
  }
  ~Harness() { ::unlink(disk_path.c_str()); }

  void restore_disk() {
    std::vector<uint8_t> bytes(kDiskBytes);
    for (uint64_t i = 0; i < kDiskBytes; ++i) bytes[i] = disk_byte(i);
    check(::pwrite(disk.get(), bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(kDiskBytes));
  }

  void activate(uint16_t size, uint64_t desc, uint64_t avail, uint64_t used, bool event_idx,
                bool indirect) {
    block->reset();
    dsec::fuzz::ready_queue(queues[0], {size, desc, avail, used}, event_idx, indirect);
    check(block->activate(queues, block->features(), interrupt).has_value());
  }

  // Turns the loop until no request is in flight; false if they do not end.
  bool drain() {
    for (int i = 0; i < 2000 && block->requests_in_flight() != 0; ++i) {
      check(loop.run_once(std::chrono::milliseconds(1)).has_value());
    }
    return block->requests_in_flight() == 0;
  }

  dsec::io::EventLoop loop = std::move(dsec::io::EventLoop::create(64).value());
  UniqueFd disk;
  std::string disk_path;
  std::unique_ptr<VirtioBlock> block;
  std::vector<virtio::VirtQueue> queues;
  std::shared_ptr<virtio::VirtioInterrupt> interrupt =
      std::make_shared<virtio::VirtioInterrupt>([](bool) {});
};

// A reset, then a read of sector 3 on clean rings.
void check_still_works(Harness& h, GuestMemory& mem) {
  constexpr uint64_t desc = kClean;
  constexpr uint64_t avail = kClean + 0x1000;
  constexpr uint64_t used = kClean + 0x2000;
  constexpr uint64_t header = kClean + 0x3000;
  constexpr uint64_t data = kClean + 0x4000;
  constexpr uint64_t status = kClean + 0x5000;
  check(mem.fill(kClean, 0x10000, 0).has_value());
  h.activate(16, desc, avail, used, false, false);
  check(mem.write_obj<uint32_t>(header, virtio::kBlkTypeIn).has_value());
  check(mem.write_obj<uint64_t>(header + 8, 3).has_value());
  check(mem.write_obj<uint8_t>(status, 0xff).has_value());
  const struct {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
  } chain[] = {{header, 16, 1}, {data, 512, 1 | 2}, {status, 1, 2}};
  for (uint16_t i = 0; i < 3; ++i) {
    check(mem.write_obj<uint64_t>(desc + 16 * i, chain[i].addr).has_value());
    check(mem.write_obj<uint32_t>(desc + 16 * i + 8, chain[i].len).has_value());
    check(mem.write_obj<uint16_t>(desc + 16 * i + 12, chain[i].flags).has_value());
    check(mem.write_obj<uint16_t>(desc + 16 * i + 14, i + 1).has_value());
  }
  check(mem.write_obj<uint16_t>(avail + 2, 1).has_value());
  h.block->notify(0);
  for (int i = 0; i < 2000 && mem.read_obj<uint16_t>(used + 2).value() != 1; ++i) {
    check(h.loop.run_once(std::chrono::milliseconds(1)).has_value());
  }
  check(mem.read_obj<uint16_t>(used + 2).value() == 1);
  check(mem.read_obj<uint32_t>(used + 8).value() == 513);
  check(mem.read_obj<uint8_t>(status).value() == virtio::kBlkStatusOk);
  std::vector<uint8_t> got(512);
  check(mem.read(data, got).has_value());
  for (uint64_t i = 0; i < 512; ++i) check(got[i] == disk_byte(3 * 512 + i));
  h.block->reset();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
  FuzzInput in({data, size});
  const auto flags = in.take<uint8_t>();
  const auto queue_size = static_cast<uint16_t>(1U << (in.take<uint8_t>() % 9));
  dsec::fuzz::fill_guest_memory(mem, kRam, in.take_bytes(in.take<uint16_t>()));
  h.restore_disk();
  const auto activate = [&] {
    h.activate(queue_size, kDesc, kAvail, kUsed, (flags & 1) != 0, (flags & 2) != 0);
  };
  activate();
  while (!in.empty()) {
    switch (in.take<uint8_t>() % 5) {
      case 0:
        h.block->notify(0);
        break;
      case 1:
        check(h.loop.run_once(std::chrono::milliseconds(0)).has_value());
        break;
      case 2:
        activate();
        break;
      case 3:
        dsec::fuzz::write_guest_memory(mem, in, kFuzzedBytes);
        break;
      case 4:
        (void)h.block->quiesce();
        if ((in.take<uint8_t>() & 1) != 0) h.block->resume_after_quiesce();
        break;
    }
  }
  h.block->resume_after_quiesce();
  check(h.drain());
  const virtio::QueueState& q = h.queues[0].state();
  if (!q.broken) {
    check(q.next_used == q.next_avail);
  }
  struct stat st {};
  check(::fstat(h.disk.get(), &st) == 0 && static_cast<uint64_t>(st.st_size) == kDiskBytes);
  h.restore_disk();  // the input's writes changed it
  check_still_works(h, mem);
  check(h.drain());
  return 0;
}

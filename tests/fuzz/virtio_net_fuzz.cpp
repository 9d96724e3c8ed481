// libFuzzer target: virtio-net's tx and rx paths (net.h) on a real event loop, with a
// SOCK_SEQPACKET socket standing in for the TAP. The fuzzer writes the guest memory (rings,
// descriptors, buffers), sizes the queues, and runs any sequence of notifications, frames
// from the host of any length, changes to guest memory, turns of the loop and device
// resets. Checked: no frame reaches the host above the device's limit; and after it all,
// a device reset leaves a device that sends a frame and receives one, exactly.
//
// Input: u8 flags (bit 0 EVENT_IDX, bit 1 INDIRECT_DESC), u8 log2 of each queue's size
// (rx, tx), u16 length of guest memory contents, the contents, then actions, each a u8
// opcode (mod 6) and its arguments:
//   0 notify rx, 1 notify tx, 2 a frame from the host: u16 length (0 sends none: a TAP
//   never reads empty), u8 seed,
//   3 a turn of the loop, 4 a device reset and activation,
//   5 a guest memory write: u16 offset, u8 length, the bytes
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_queue.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/virtio/net/net.h"
#include "vmm/devices/virtio/virtio_spec.h"
#include "vmm/io/event_loop.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::UniqueFd;
using dsec::fuzz::check;
using dsec::fuzz::FuzzInput;
namespace virtio = dsec::virtio;
using virtio::VirtioNet;

constexpr std::array<GuestRange, 1> kRam{{{0, 0x100000}}};
constexpr uint64_t kFuzzedBytes = 0x10000;  // the fuzzer's part of RAM; the rest is clean
// The fuzzer's queues: rings in its part of RAM.
constexpr std::array<uint64_t, 2> kDesc{0x0000, 0x3000};
constexpr std::array<uint64_t, 2> kAvail{0x1000, 0x4000};
constexpr std::array<uint64_t, 2> kUsed{0x2000, 0x5000};
// The clean queues of the final check, past it.
constexpr uint64_t kClean = 0x80000;
constexpr uint32_t kMaxFramesPerInput = 64;
constexpr uint32_t kRxBufferSize = 0x800;

struct Harness {
  Harness() {
    int fds[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    host.reset(fds[1]);
    GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
    net = std::move(
        VirtioNet::create_on_fd(UniqueFd(fds[0]), {0x52, 0x54, 0, 0, 0, 1}, mem, loop).value());
    for (int q = 0; q < 2; ++q)
      queues.push_back(virtio::VirtQueue::create(VirtioNet::kQueueSize).value());
  }

  void turn() {
    for (int i = 0; i < 3; ++i) check(loop.run_once(std::chrono::milliseconds(0)).has_value());
    // What reached the "TAP": never a frame above the limit.
    static std::vector<uint8_t> frame(0x20000);
    for (;;) {
      const ssize_t n = ::recv(host.get(), frame.data(), frame.size(), MSG_DONTWAIT);
      if (n < 0) break;
      check(static_cast<size_t>(n) <= VirtioNet::kMaxFrameSize);
      last_sent.assign(frame.begin(), frame.begin() + n);
    }
  }

  // Resets the device and activates it on queues of these sizes and rings.
  void activate(const std::array<uint16_t, 2>& sizes, const std::array<uint64_t, 2>& desc,
                const std::array<uint64_t, 2>& avail, const std::array<uint64_t, 2>& used,
                bool event_idx, bool indirect) {
    net->reset();
    for (size_t q = 0; q < 2; ++q) {
      dsec::fuzz::ready_queue(queues[q], {sizes[q], desc[q], avail[q], used[q]}, event_idx,
                              indirect);
    }
    check(net->activate(queues, net->features(), interrupt).has_value());
  }

  dsec::io::EventLoop loop = std::move(dsec::io::EventLoop::create(64).value());
  UniqueFd host;  // the TAP's other end
  std::unique_ptr<VirtioNet> net;
  std::vector<virtio::VirtQueue> queues;
  std::shared_ptr<virtio::VirtioInterrupt> interrupt =
      std::make_shared<virtio::VirtioInterrupt>([](bool) {});
  std::vector<uint8_t> last_sent;
};

std::vector<uint8_t> frame_of(size_t len, uint8_t seed) {
  std::vector<uint8_t> frame(len);
  for (size_t i = 0; i < len; ++i) frame[i] = static_cast<uint8_t>(seed + i * 7);
  return frame;
}

template <typename T>
T read(GuestMemory& mem, uint64_t gpa) {
  return mem.read_obj<T>(gpa).value();
}

// After the fuzzer's input: a reset, then one frame each way on clean rings.
void check_still_works(Harness& h, GuestMemory& mem, uint32_t frames_from_host) {
  constexpr std::array<uint64_t, 2> desc{kClean, kClean + 0x3000};
  constexpr std::array<uint64_t, 2> avail{kClean + 0x1000, kClean + 0x4000};
  constexpr std::array<uint64_t, 2> used{kClean + 0x2000, kClean + 0x5000};
  constexpr uint64_t buffers = kClean + 0x6000;
  h.turn();
  check(mem.fill(kClean, 0x80000, 0).has_value());
  h.activate({256, 256}, desc, avail, used, false, false);

  // tx: a header and a 60-byte frame come out as the frame.
  const std::vector<uint8_t> sent = frame_of(60, 0x3c);
  check(mem.write(buffers + VirtioNet::kHeaderSize, sent).has_value());
  check(mem.write_obj<uint64_t>(desc[1], buffers).has_value());
  check(mem.write_obj<uint32_t>(desc[1] + 8, VirtioNet::kHeaderSize + 60).has_value());
  check(mem.write_obj<uint16_t>(avail[1] + 4, 0).has_value());
  check(mem.write_obj<uint16_t>(avail[1] + 2, 1).has_value());
  h.last_sent.clear();
  h.net->notify(VirtioNet::kTxQueue);
  for (int i = 0; i < 100 && h.last_sent.empty(); ++i) h.turn();
  check(h.last_sent == sent);
  check(read<uint16_t>(mem, used[1] + 2) == 1);

  // rx: frames the host sent during the input may come first; then ours, whole.
  const uint16_t count = static_cast<uint16_t>(frames_from_host + 1);
  const uint64_t rx_buffers = buffers + 0x1000;
  for (uint16_t i = 0; i < count; ++i) {
    check(mem.write_obj<uint64_t>(desc[0] + 16 * i, rx_buffers + kRxBufferSize * i).has_value());
    check(mem.write_obj<uint32_t>(desc[0] + 16 * i + 8, kRxBufferSize).has_value());
    check(mem.write_obj<uint16_t>(desc[0] + 16 * i + 12, 2).has_value());  // WRITE
    check(mem.write_obj<uint16_t>(avail[0] + 4 + 2 * i, i).has_value());
  }
  check(mem.write_obj<uint16_t>(avail[0] + 2, count).has_value());
  h.net->notify(VirtioNet::kRxQueue);
  // The frames still in the socket may fill it: room comes as the device takes them.
  const std::vector<uint8_t> received = frame_of(100, 0x64);
  bool queued = false;
  for (int i = 0; i < 200 && !queued; ++i) {
    queued = ::send(h.host.get(), received.data(), received.size(), MSG_DONTWAIT) == 100;
    if (!queued) h.turn();
  }
  check(queued);
  bool delivered = false;
  for (int i = 0; i < 200 && !delivered; ++i) {
    h.turn();
    const uint16_t used_idx = read<uint16_t>(mem, used[0] + 2);
    for (uint16_t u = 0; u < used_idx && !delivered; ++u) {
      const uint32_t id = read<uint32_t>(mem, used[0] + 4 + 8 * u);
      const uint32_t len = read<uint32_t>(mem, used[0] + 8 + 8 * u);
      check(id < count);
      if (len != VirtioNet::kHeaderSize + 100) continue;
      std::vector<uint8_t> got(100);
      check(mem.read(rx_buffers + kRxBufferSize * id + VirtioNet::kHeaderSize, got).has_value());
      delivered = got == received;
    }
  }
  check(delivered);
  h.net->reset();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
  FuzzInput in({data, size});
  const auto flags = in.take<uint8_t>();
  const std::array<uint16_t, 2> sizes{static_cast<uint16_t>(1U << (in.take<uint8_t>() % 9)),
                                      static_cast<uint16_t>(1U << (in.take<uint8_t>() % 9))};
  const auto contents = in.take_bytes(in.take<uint16_t>());
  dsec::fuzz::fill_guest_memory(mem, kRam, contents);
  const auto activate = [&] {
    h.activate(sizes, kDesc, kAvail, kUsed, (flags & 1) != 0, (flags & 2) != 0);
  };
  activate();
  uint32_t frames = 0;
  while (!in.empty()) {
    switch (in.take<uint8_t>() % 6) {
      case 0:
        h.net->notify(VirtioNet::kRxQueue);
        break;
      case 1:
        h.net->notify(VirtioNet::kTxQueue);
        break;
      case 2: {
        const auto len = in.take<uint16_t>();
        const auto frame = frame_of(len, in.take<uint8_t>());
        if (len != 0 && frames < kMaxFramesPerInput &&
            ::send(h.host.get(), frame.data(), frame.size(), MSG_DONTWAIT) >= 0) {
          ++frames;
        }
        break;
      }
      case 3:
        h.turn();
        break;
      case 4:
        activate();
        break;
      case 5:
        dsec::fuzz::write_guest_memory(mem, in, kFuzzedBytes);
        break;
    }
  }
  check_still_works(h, mem, frames);
  return 0;
}

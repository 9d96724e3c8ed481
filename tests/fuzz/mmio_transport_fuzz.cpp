// libFuzzer target: a virtio-mmio transport driven by any sequence of register accesses
// of any width and offset, over guest memory the fuzzer fills, with a device that serves
// its queues on every notification. Ends by saving the state and restoring it into a fresh
// transport. Any crash, hang or sanitizer report is a bug.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "tests/fuzz/fuzz_guest_memory.h"
#include "tests/support/fake_virtio_device.h"
#include "vmm/devices/virtio/mmio_transport.h"
#include "vmm/memory/guest_memory.h"

namespace {

using dsec::GuestMemory;
using dsec::GuestRange;
using dsec::virtio::MmioTransport;
using dsec::virtio::testing::FakeVirtioDevice;

constexpr std::array<GuestRange, 1> kRam{{{0, 0x10000}}};
constexpr uint64_t kFeatures = (uint64_t{1} << 28) | (uint64_t{1} << 29) | 0xff;
// An access: op bit 0 = write, bits 1-3 pick the width; then offset and value.
constexpr size_t kAccessBytes = 8;
constexpr std::array<size_t, 8> kWidths{4, 4, 4, 4, 1, 2, 8, 3};

std::unique_ptr<MmioTransport> make_transport(GuestMemory& mem) {
  auto device = std::make_unique<FakeVirtioDevice>(kFeatures, std::vector<uint16_t>{4, 256},
                                                   std::vector<uint8_t>(24, 0x5a));
  device->serve_queues_in = &mem;
  return std::move(MmioTransport::create(mem, std::move(device), [](bool) {}).value());
}

}  // namespace

// Input: u16 count of accesses, the accesses, then guest memory contents.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) {
    return -1;
  }
  uint16_t count = 0;
  std::memcpy(&count, data, 2);
  std::span<const uint8_t> input(data + 2, size - 2);
  const size_t access_bytes = std::min<size_t>(input.size() / kAccessBytes, count) * kAccessBytes;
  const auto accesses = input.first(access_bytes);
  const auto contents = input.subspan(access_bytes);

  GuestMemory& mem = dsec::fuzz::guest_memory(kRam);
  dsec::fuzz::fill_guest_memory(mem, kRam, contents);

  auto transport = make_transport(mem);
  for (size_t at = 0; at < accesses.size(); at += kAccessBytes) {
    const uint8_t op = accesses[at];
    uint16_t offset = 0;
    std::memcpy(&offset, &accesses[at + 1], 2);
    offset &= 0xfff;  // inside the 4 KiB window, as the bus guarantees
    const size_t width = std::min<size_t>(kWidths[(op >> 1) & 7], 0x1000 - offset);
    std::array<uint8_t, 8> bytes{};
    std::memcpy(bytes.data(), &accesses[at + 3], 5);
    const std::span<uint8_t> access(bytes.data(), width);
    if ((op & 1) != 0) {
      transport->write(offset, access);
    } else {
      transport->read(offset, access);
    }
  }

  const auto saved = transport->state();
  auto restored = make_transport(mem);
  (void)restored->restore(saved);
  return 0;
}

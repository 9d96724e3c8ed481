// The VM's virtio devices wired to a real KVM VM: each transport answers in its slot,
// the event loop starts and stops, and destroying the devices undoes every ioeventfd and
// irqfd registration and closes every fd.
#include "vmm/machine/virtio_devices.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "tests/kvm/test_vm.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::test {
namespace {

using machine::VirtioDeviceKind;
using machine::VirtioDevices;

size_t open_fds() {
  size_t n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
  }
  return n;
}

GuestMemory make_memory() {
  const std::array<GuestRange, 1> ranges{{{0, 1 << 20}}};
  return std::move(GuestMemory::anonymous(ranges).value());
}

uint32_t read_register(const devices::Bus& mmio, uint64_t address) {
  std::array<uint8_t, 4> bytes{};
  EXPECT_TRUE(mmio.read(address, bytes));
  uint32_t value = 0;
  std::memcpy(&value, bytes.data(), 4);
  return value;
}

std::vector<machine::VirtioDeviceSpec> rng_only() {
  machine::VirtioDeviceSpec rng;
  rng.kind = machine::VirtioDeviceKind::kRng;
  return {rng};
}

TEST(VirtioDevices, AnRngAnswersInSlotZeroAndItsLoopStartsAndStops) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  GuestMemory memory = make_memory();
  devices::Bus mmio(devices::AddressSpace::kMmio);
  ASSERT_OK_AND_ASSIGN(auto devices,
                       VirtioDevices::create(t.vm, memory, mmio, rng_only()));
  ASSERT_EQ(devices->size(), 1u);
  const uint64_t base = x86_64::virtio_mmio_slot(0).address;
  EXPECT_EQ(read_register(mmio, base), 0x74726976u);  // "virt"
  EXPECT_EQ(read_register(mmio, base + 0x008), 4u);   // entropy device
  // Its queue's notifications bypass the vCPU: KVM holds an ioeventfd for a 4-byte write
  // of 0 to QueueNotify, and refuses a second one for the same write.
  ASSERT_OK_AND_ASSIGN(io::EventFd other, io::EventFd::create());
  const auto again = t.vm.register_ioeventfd({.eventfd = other.fd(),
                                              .space = kvm::IoSpace::kMmio,
                                              .address = base + 0x050,
                                              .length = 4,
                                              .datamatch = 0});
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().os_errno(), EEXIST) << again.error().message();
  ASSERT_OK(devices->start());
  ASSERT_OK(devices->stop());
}

TEST(VirtioDevices, DestroyingThemUnregistersFromKvmAndLeaksNoFds) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  GuestMemory memory = make_memory();
  const size_t before = open_fds();
  // The same VM each time: an ioeventfd left registered would make the next
  // KVM_IOEVENTFD for the same address and datamatch fail (EEXIST).
  for (int i = 0; i < 3; ++i) {
    devices::Bus mmio(devices::AddressSpace::kMmio);
    ASSERT_OK_AND_ASSIGN(auto devices,
                         VirtioDevices::create(t.vm, memory, mmio, rng_only()));
    ASSERT_OK(devices->start());
    // Destroyed running: the destructor stops the loop first.
  }
  EXPECT_EQ(open_fds(), before);
}

}  // namespace
}  // namespace dsec::test

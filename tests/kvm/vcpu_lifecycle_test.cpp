// vCPU threads and their lifecycle on real KVM: start, pause (kicked out of KVM_RUN),
// resume, stop; a triple fault ends the VM with a defined exit; port writes reach the bus;
// nothing leaks.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/kvm/test_vm.h"
#include "vmm/machine/vcpu_thread.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using machine::RunControl;
using machine::RunState;
using machine::VcpuThread;
using machine::VmExitKind;
using ::testing::HasSubstr;

// Records the bytes written to its port.
class RecordingDevice final : public devices::BusDevice {
 public:
  void read(uint64_t, std::span<uint8_t> data) override { std::ranges::fill(data, uint8_t{0}); }
  void write(uint64_t, std::span<const uint8_t> data) override {
    std::lock_guard lock(mutex_);
    bytes_.insert(bytes_.end(), data.begin(), data.end());
  }
  std::vector<uint8_t> bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<uint8_t> bytes_;
};

// Waits for `condition` for up to `deadline`; true if it held.
template <typename F>
bool eventually(F condition, std::chrono::milliseconds deadline = 30s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

size_t open_fds() {
  size_t n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
  }
  return n;
}

// Triple-faults at once: INT 3 through a real-mode IVT whose limit is 0.
void make_triple_fault(TestVm& t, std::span<const uint8_t> before) {
  std::vector<uint8_t> code(before.begin(), before.end());
  code.push_back(0xcc);  // int3
  ASSERT_OK(start_real_mode(t, code));
  ASSERT_OK_AND_ASSIGN(kvm_sregs sregs, t.vcpu.get_sregs());
  sregs.idt.base = 0;
  sregs.idt.limit = 0;
  ASSERT_OK(t.vcpu.set_sregs(sregs));
}

TEST(VcpuLifecycle, PauseKicksASpinningVcpuOutAndResumeAndStopEndIt) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  ASSERT_OK(start_real_mode(t, std::vector<uint8_t>{0xeb, 0xfe}));  // jmp $: never exits
  devices::Bus pio(devices::AddressSpace::kPio);
  devices::Bus mmio(devices::AddressSpace::kMmio);
  RunControl control(1);
  VcpuThread thread(std::move(t.vcpu), pio, mmio, control);
  control.set_kick([&] { thread.kick(); });
  thread.start();
  ASSERT_TRUE(eventually([&] { return control.first_kvm_run().has_value(); }));
  std::this_thread::sleep_for(50ms);  // let it get inside KVM_RUN

  control.pause();  // returns only once the vCPU is parked outside KVM_RUN
  EXPECT_EQ(control.state(), RunState::kPaused);
  control.resume();
  EXPECT_EQ(control.state(), RunState::kRunning);
  std::this_thread::sleep_for(50ms);
  control.pause();
  control.resume();

  control.request_exit({VmExitKind::kStopped, "test"});
  thread.join();  // would hang if the kick did not reach KVM_RUN
  EXPECT_EQ(control.wait_for_exit().kind, VmExitKind::kStopped);
}

TEST(VcpuLifecycle, PortWritesReachTheBusAndATripleFaultEndsTheVm) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  // mov dx, 0x3f8; mov al, 'o'; out dx, al; mov al, 'k'; out dx, al; then int3 -> triple fault
  const std::vector<uint8_t> prefix = {0xba, 0xf8, 0x03, 0xb0, 'o', 0xee, 0xb0, 'k', 0xee};
  ASSERT_NO_FATAL_FAILURE(make_triple_fault(t, prefix));
  devices::Bus pio(devices::AddressSpace::kPio);
  devices::Bus mmio(devices::AddressSpace::kMmio);
  auto device = std::make_shared<RecordingDevice>();
  ASSERT_OK(pio.insert({0x3f8, 8}, device));
  RunControl control(1);
  VcpuThread thread(std::move(t.vcpu), pio, mmio, control);
  control.set_kick([&] { thread.kick(); });
  thread.start();
  const auto exit = control.wait_for_exit();
  thread.join();
  EXPECT_EQ(exit.kind, VmExitKind::kTripleFault) << exit.describe();
  EXPECT_EQ(exit.exit_code(), 2);
  // The message says where the guest was: real mode (CR0.PE clear), just past the int3.
  EXPECT_THAT(exit.describe(), HasSubstr("triple-faulted at RIP=")) << exit.describe();
  EXPECT_EQ(device->bytes(), (std::vector<uint8_t>{'o', 'k'}));
}

TEST(VcpuLifecycle, CreateRunDestroyLeaksNoFds) {
  const size_t before = open_fds();
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
    ASSERT_OK(start_real_mode(t, std::vector<uint8_t>{0xeb, 0xfe}));
    devices::Bus pio(devices::AddressSpace::kPio);
    devices::Bus mmio(devices::AddressSpace::kMmio);
    RunControl control(1);
    VcpuThread thread(std::move(t.vcpu), pio, mmio, control);
    control.set_kick([&] { thread.kick(); });
    thread.start();
    ASSERT_TRUE(eventually([&] { return control.first_kvm_run().has_value(); }));
    control.request_exit({VmExitKind::kStopped, "test"});
    thread.join();
  }
  EXPECT_EQ(open_fds(), before);
}

}  // namespace
}  // namespace dsec::test

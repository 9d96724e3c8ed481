// vCPU and VM snapshot state on real KVM: a guest counting in a loop is kicked out of
// KVM_RUN, captured, and restored into a fresh VM with a copy of its memory, where it
// counts on from where it was; a capture of the restored VM equals the first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "tests/kvm/test_vm.h"
#include "vmm/arch/x86_64/vcpu_init.h"
#include "vmm/kvm/snapshot_msrs.h"
#include "vmm/kvm/vcpu_state.h"
#include "vmm/kvm/vm_state.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr uint64_t kCounterAddress = 0x6000;
constexpr uint64_t kStartsAddress = 0x6008;

// Counts the entries into the code at kStartsAddress, programs PIT channel 2 (mode 0,
// count 0x1234) and masks IRQ 2 in the master PIC (both in-kernel: no exit), then counts
// in RAX, storing each value at kCounterAddress. It never exits by itself.
const std::vector<uint8_t> kCountingGuest = {
    0x48, 0xff, 0x04, 0x25, 0x08, 0x60, 0x00, 0x00,  // inc qword [0x6008]
    0xb0, 0xb0, 0xe6, 0x43,                          // mov al, 0xb0; out 0x43, al
    0xb0, 0x34, 0xe6, 0x42,                          // mov al, 0x34; out 0x42, al
    0xb0, 0x12, 0xe6, 0x42,                          // mov al, 0x12; out 0x42, al
    0xb0, 0xfb, 0xe6, 0x21,                          // mov al, 0xfb; out 0x21, al
    0x31, 0xc0,                                      // xor eax, eax
    0x48, 0xff, 0xc0,                                // loop: inc rax
    0x48, 0x89, 0x04, 0x25, 0x00, 0x60, 0x00, 0x00,  // mov [0x6000], rax
    0xeb, 0xf3,                                      // jmp loop
};

uint64_t read_u64(const GuestRam& ram, uint64_t address) {
  // The vCPU may be writing it: read atomically.
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(ram.data() + address))
      .load(std::memory_order_relaxed);
}

template <typename T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// A vCPU in KVM_RUN on its own thread until kicked, as a paused VM's vCPUs are.
class RunningVcpu {
 public:
  explicit RunningVcpu(kvm::Vcpu& vcpu) : vcpu_(vcpu) {
    // The kick's signal does nothing but make KVM_RUN return EINTR (no SA_RESTART).
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigemptyset(&action.sa_mask);
    sigaction(SIGRTMIN, &action, nullptr);
    thread_ = std::thread([this] { exit_ = vcpu_.run(); });
  }
  RunningVcpu(const RunningVcpu&) = delete;
  RunningVcpu& operator=(const RunningVcpu&) = delete;
  ~RunningVcpu() {
    if (thread_.joinable()) kick();
  }

  // immediate_exit stops a thread that has not entered KVM_RUN yet, the signal one inside.
  Result<kvm::VcpuExit> kick() {
    vcpu_.set_immediate_exit(true);
    pthread_kill(thread_.native_handle(), SIGRTMIN);
    thread_.join();
    vcpu_.set_immediate_exit(false);
    return exit_;
  }

 private:
  kvm::Vcpu& vcpu_;
  Result<kvm::VcpuExit> exit_ = fail("never ran");
  std::thread thread_;
};

template <typename F>
bool eventually(F condition, std::chrono::milliseconds deadline = 60s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

// Runs `vcpu` until the counter at kCounterAddress passes `above`, then kicks it out.
void run_until_counter_passes(TestVm& t, uint64_t above) {
  RunningVcpu running(t.vcpu);
  EXPECT_TRUE(eventually([&] { return read_u64(t.ram, kCounterAddress) > above; }))
      << "counter stuck at " << read_u64(t.ram, kCounterAddress);
  ASSERT_OK_AND_ASSIGN(const kvm::VcpuExit exit, running.kick());
  EXPECT_TRUE(std::holds_alternative<kvm::InterruptedExit>(exit)) << kvm::describe(exit);
}

// VM A: the counting guest in long mode, with CPUID, LINT0/LINT1 wired, a task priority
// of 0x20 and IOAPIC pin 3 set, so that the LAPIC and IOAPIC hold more than reset values,
// and a TSC as if it had been up for 100 s. (KVM before Linux 6.6 takes a TSC write within
// a second of what it expects as a sync between vCPUs and keeps its own value: restoring a
// TSC younger than that into a fresh VM restarts it near 0.)
Result<TestVm> create_counting_vm() {
  TestVm t = DSEC_TRY(create_test_vm({.irqchip = true}));
  DSEC_TRY(t.vcpu.set_cpuid2(DSEC_TRY(t.kvm.supported_cpuid())));
  const uint64_t tsc_hz = uint64_t{DSEC_TRY(t.vcpu.get_tsc_khz())} * 1000;
  DSEC_TRY(t.vcpu.set_msrs(std::vector<kvm_msr_entry>{
      {.index = kvm::kMsrIa32Tsc, .reserved = 0, .data = 100 * tsc_hz}}));
  kvm_lapic_state lapic = x86_64::lapic_with_lint_modes(DSEC_TRY(t.vcpu.get_lapic()));
  lapic.regs[0x80] = 0x20;  // TPR
  DSEC_TRY(t.vcpu.set_lapic(lapic));
  kvm_irqchip ioapic = DSEC_TRY(t.vm.get_irqchip(KVM_IRQCHIP_IOAPIC));
  ioapic.chip.ioapic.redirtbl[3].bits = 0x10033;  // masked, vector 0x33
  DSEC_TRY(t.vm.set_irqchip(ioapic));
  DSEC_TRY(start_long_mode(t, kCountingGuest));
  return t;
}

// A fresh VM B like A, its RAM a copy of `memory`: what restoring a snapshot starts from.
Result<TestVm> create_vm_with_memory(const std::vector<uint8_t>& memory) {
  TestVm t = DSEC_TRY(create_test_vm({.ram_size = memory.size(), .irqchip = true}));
  std::memcpy(t.ram.data(), memory.data(), memory.size());
  return t;
}

struct Snapshot {
  kvm::VcpuState vcpu;
  kvm::VmState vm;
  std::vector<uint8_t> memory;
};

// Captures A and sends both states through their encoding, as a state file would.
Result<Snapshot> take_snapshot(TestVm& a) {
  const auto msr_indices = DSEC_TRY(kvm::snapshot_msr_indices(a.kvm));
  const kvm::VcpuState vcpu = DSEC_TRY(kvm::capture(a.vcpu, msr_indices));
  const kvm::VmState vm = DSEC_TRY(kvm::capture(a.vm));
  return Snapshot{DSEC_TRY(kvm::decode_vcpu_state(kvm::encode(vcpu))),
                  DSEC_TRY(kvm::decode_vm_state(kvm::encode(vm))),
                  std::vector<uint8_t>(a.ram.data(), a.ram.data() + a.ram.size())};
}

Result<TestVm> restore_snapshot(const Snapshot& snapshot) {
  TestVm b = DSEC_TRY(create_vm_with_memory(snapshot.memory));
  const uint32_t host_tsc_khz = DSEC_TRY(b.vcpu.get_tsc_khz());
  DSEC_TRY(kvm::restore(b.vcpu, snapshot.vcpu, host_tsc_khz));
  DSEC_TRY(kvm::restore(b.vm, snapshot.vm));
  return b;
}

TEST(SnapshotState, RestoredVmCountsOnFromWhereTheFirstStopped) {
  ASSERT_OK_AND_ASSIGN(TestVm a, create_counting_vm());
  ASSERT_NO_FATAL_FAILURE(run_until_counter_passes(a, 1000));
  ASSERT_OK_AND_ASSIGN(const Snapshot snapshot, take_snapshot(a));
  const uint64_t saved_count = snapshot.vcpu.regs.rax;
  EXPECT_GT(saved_count, 1000U);
  EXPECT_EQ(read_u64(a.ram, kStartsAddress), 1U);

  ASSERT_OK_AND_ASSIGN(TestVm b, restore_snapshot(snapshot));
  ASSERT_OK_AND_ASSIGN(const kvm_regs regs, b.vcpu.get_regs());
  EXPECT_TRUE(same_bytes(regs, snapshot.vcpu.regs))
      << "rip " << std::hex << regs.rip << " vs " << snapshot.vcpu.regs.rip;
  ASSERT_OK_AND_ASSIGN(const kvm_sregs sregs, b.vcpu.get_sregs());
  EXPECT_TRUE(same_bytes(sregs, snapshot.vcpu.sregs));

  // The VM-wide state is A's: the guest's PIT and PIC programming, the IOAPIC pin, and a
  // clock that went on from A's instead of starting at B's creation.
  ASSERT_OK_AND_ASSIGN(const kvm_pit_state2 pit, b.vm.get_pit2());
  EXPECT_EQ(pit.channels[2].count, 0x1234U);
  EXPECT_EQ(pit.channels[2].mode, 0);
  ASSERT_OK_AND_ASSIGN(const kvm_irqchip pic, b.vm.get_irqchip(KVM_IRQCHIP_PIC_MASTER));
  EXPECT_EQ(pic.chip.pic.imr, 0xfb);
  ASSERT_OK_AND_ASSIGN(const kvm_irqchip ioapic, b.vm.get_irqchip(KVM_IRQCHIP_IOAPIC));
  EXPECT_EQ(ioapic.chip.ioapic.redirtbl[3].bits, 0x10033U);
  ASSERT_OK_AND_ASSIGN(const kvm_clock_data clock, b.vm.get_clock());
  EXPECT_GE(clock.clock, snapshot.vm.clock.clock);

  ASSERT_NO_FATAL_FAILURE(run_until_counter_passes(b, saved_count + 1000));
  ASSERT_OK_AND_ASSIGN(const kvm_regs after, b.vcpu.get_regs());
  EXPECT_GT(after.rax, saved_count + 1000);
  // B went on in the loop: it never ran the entry code again (which would also have
  // restarted the count from 0).
  EXPECT_EQ(read_u64(b.ram, kStartsAddress), 1U);
}

TEST(SnapshotState, CaptureOfTheRestoredVcpuEqualsTheSnapshot) {
  ASSERT_OK_AND_ASSIGN(TestVm a, create_counting_vm());
  ASSERT_NO_FATAL_FAILURE(run_until_counter_passes(a, 1000));
  ASSERT_OK_AND_ASSIGN(const Snapshot snapshot, take_snapshot(a));
  ASSERT_OK_AND_ASSIGN(TestVm b, restore_snapshot(snapshot));
  ASSERT_OK_AND_ASSIGN(const auto msr_indices, kvm::snapshot_msr_indices(b.kvm));
  ASSERT_OK_AND_ASSIGN(const kvm::VcpuState again, kvm::capture(b.vcpu, msr_indices));
  const kvm::VcpuState& saved = snapshot.vcpu;

  EXPECT_TRUE(same_bytes(again.mp_state, saved.mp_state));
  EXPECT_TRUE(same_bytes(again.regs, saved.regs));
  EXPECT_TRUE(same_bytes(again.sregs, saved.sregs));
  EXPECT_EQ(again.xsave, saved.xsave);
  EXPECT_TRUE(same_bytes(again.xcrs, saved.xcrs));
  EXPECT_TRUE(same_bytes(again.debugregs, saved.debugregs));
  EXPECT_TRUE(same_bytes(again.lapic, saved.lapic));
  EXPECT_EQ(again.lapic.regs[0x80], 0x20);
  EXPECT_TRUE(same_bytes(again.events, saved.events));
  EXPECT_EQ(again.tsc_khz, saved.tsc_khz);
  ASSERT_EQ(again.cpuid.size(), saved.cpuid.size());
  for (size_t i = 0; i < saved.cpuid.size(); ++i) {
    EXPECT_TRUE(same_bytes(again.cpuid[i], saved.cpuid[i])) << "CPUID entry " << i;
  }
  ASSERT_EQ(again.msrs.size(), saved.msrs.size());
  for (size_t i = 0; i < saved.msrs.size(); ++i) {
    ASSERT_EQ(again.msrs[i].index, saved.msrs[i].index);
    if (saved.msrs[i].index == kvm::kMsrIa32Tsc) {
      // Time passed between the two captures; the TSC went on from the saved value (not
      // from B's creation, which would be some 100 s of cycles less).
      EXPECT_GE(again.msrs[i].data, saved.msrs[i].data);
    } else {
      EXPECT_EQ(again.msrs[i].data, saved.msrs[i].data)
          << "MSR " << std::hex << saved.msrs[i].index;
    }
  }
}

TEST(SnapshotState, CaptureSavesTheMsrsThatMatterAndSkipsUnreadableOnes) {
  ASSERT_OK_AND_ASSIGN(TestVm a, create_counting_vm());
  ASSERT_OK_AND_ASSIGN(const auto indices, kvm::snapshot_msr_indices(a.kvm));
  ASSERT_OK_AND_ASSIGN(const kvm::VcpuState state, kvm::capture(a.vcpu, indices));
  std::vector<uint32_t> captured;
  for (const kvm_msr_entry& entry : state.msrs) captured.push_back(entry.index);
  for (const uint32_t index : {0x10U, 0x174U, 0x277U, 0x2ffU, 0x6e0U, 0xc0000081U, 0xc0000082U,
                               0xc0000102U, 0x4b564d01U}) {
    EXPECT_NE(std::ranges::find(captured, index), captured.end()) << std::hex << index;
  }
  // Informational: what this host's KVM lists but the vCPU would not read.
  std::cerr << "snapshot MSRs: " << captured.size() << " of " << indices.size() << " read;";
  for (const uint32_t index : indices) {
    if (std::ranges::find(captured, index) == captured.end()) std::cerr << ' ' << std::hex << index;
  }
  std::cerr << std::dec << '\n';

  // An MSR no vCPU has, between two that read: left out, the rest kept in order.
  constexpr uint32_t kNoSuchMsr = 0x4b564dff;
  ASSERT_OK_AND_ASSIGN(const kvm::VcpuState some,
                       kvm::capture(a.vcpu, std::vector<uint32_t>{0x10, kNoSuchMsr, 0x174}));
  ASSERT_EQ(some.msrs.size(), 2U);
  EXPECT_EQ(some.msrs[0].index, 0x10U);
  EXPECT_EQ(some.msrs[1].index, 0x174U);
}

TEST(SnapshotState, AnotherTscRateIsScaledOrRefused) {
  ASSERT_OK_AND_ASSIGN(TestVm a, create_counting_vm());
  ASSERT_OK_AND_ASSIGN(const auto indices, kvm::snapshot_msr_indices(a.kvm));
  ASSERT_OK_AND_ASSIGN(kvm::VcpuState state, kvm::capture(a.vcpu, indices));
  ASSERT_GT(state.tsc_khz, 0U);
  const uint32_t host_khz = state.tsc_khz;
  state.tsc_khz = host_khz + host_khz / 100;  // 1% faster

  ASSERT_OK_AND_ASSIGN(TestVm b, create_vm_with_memory(std::vector<uint8_t>(2 << 20)));
  const auto restored = kvm::restore(b.vcpu, state, host_khz);
  if (b.vcpu.can_scale_tsc()) {
    ASSERT_OK(restored);
    ASSERT_OK_AND_ASSIGN(const uint32_t khz, b.vcpu.get_tsc_khz());
    EXPECT_EQ(khz, state.tsc_khz);
  } else {
    ASSERT_FALSE(restored.has_value());
    EXPECT_THAT(restored.error().message(), HasSubstr("KVM cannot scale it"));
    std::cerr << "no TSC scaling here: " << restored.error().message() << '\n';
  }
}

TEST(SnapshotState, XsaveAreaHasTheSizeKvmReports) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  ASSERT_OK_AND_ASSIGN(const int xsave2, t.vm.check_extension(KVM_CAP_XSAVE2));
  EXPECT_EQ(t.vcpu.xsave_size(), std::max<size_t>(4096, static_cast<size_t>(xsave2)));
  ASSERT_OK_AND_ASSIGN(const auto area, t.vcpu.get_xsave_area());
  EXPECT_EQ(area.size(), t.vcpu.xsave_size());
  // The legacy call and the area agree on the first 4 KiB (MXCSR's reset value included).
  ASSERT_OK_AND_ASSIGN(const kvm_xsave legacy, t.vcpu.get_xsave());
  EXPECT_EQ(std::memcmp(area.data(), legacy.region, sizeof(legacy.region)), 0);
  EXPECT_EQ(legacy.region[6], 0x1f80U);
  ASSERT_OK(t.vcpu.set_xsave_area(area));
  // A guest without kvmclock has nothing for KVMCLOCK_CTRL to do: not an error.
  ASSERT_OK(t.vcpu.kvmclock_ctrl());
}

}  // namespace
}  // namespace dsec::test

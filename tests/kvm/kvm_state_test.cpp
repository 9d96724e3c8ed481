// VM and vCPU state, the pieces snapshots are made of, plus ioeventfd, irqfd, dirty
// logging and immediate_exit, each checked by what the guest or the kernel does with it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <vector>

#include "tests/kvm/test_vm.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;

UniqueFd make_eventfd() {
  return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
}

TEST(KvmState, VcpuStateRoundTrips) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  kvm::Vcpu& vcpu = t.vcpu;

  ASSERT_OK_AND_ASSIGN(const auto supported, t.kvm.supported_cpuid());
  ASSERT_OK(vcpu.set_cpuid2(supported));
  ASSERT_OK_AND_ASSIGN(const auto cpuid, vcpu.get_cpuid2());
  EXPECT_EQ(cpuid.size(), supported.size());

  ASSERT_OK_AND_ASSIGN(kvm_regs regs, vcpu.get_regs());
  regs.rax = 0x1122334455667788;
  regs.rflags = 0x2;
  ASSERT_OK(vcpu.set_regs(regs));
  ASSERT_OK_AND_ASSIGN(const kvm_regs regs_back, vcpu.get_regs());
  EXPECT_EQ(regs_back.rax, 0x1122334455667788U);

  ASSERT_OK_AND_ASSIGN(kvm_fpu fpu, vcpu.get_fpu());
  fpu.fcw = 0x27f;  // not the reset value 0x37f
  ASSERT_OK(vcpu.set_fpu(fpu));
  ASSERT_OK_AND_ASSIGN(const kvm_fpu fpu_back, vcpu.get_fpu());
  EXPECT_EQ(fpu_back.fcw, 0x27f);

  // KVM_SET_FPU ignores MXCSR; XSAVE carries it, at byte 24 of the legacy area, and KVM
  // takes it only if XSTATE_BV (byte 512) marks x87 or SSE state as present.
  ASSERT_OK_AND_ASSIGN(kvm_xsave xsave, vcpu.get_xsave());
  EXPECT_EQ(xsave.region[6], 0x1f80U);  // the reset value
  xsave.region[6] = 0x7f80;             // round toward zero
  xsave.region[128] |= 0x3;             // XSTATE_BV: x87, SSE
  ASSERT_OK(vcpu.set_xsave(xsave));
  ASSERT_OK_AND_ASSIGN(const kvm_xsave xsave_back, vcpu.get_xsave());
  EXPECT_EQ(xsave_back.region[6], 0x7f80U);

  ASSERT_OK_AND_ASSIGN(kvm_debugregs debugregs, vcpu.get_debugregs());
  debugregs.db[0] = 0x1000;
  ASSERT_OK(vcpu.set_debugregs(debugregs));
  ASSERT_OK_AND_ASSIGN(const kvm_debugregs debugregs_back, vcpu.get_debugregs());
  EXPECT_EQ(debugregs_back.db[0], 0x1000U);

  // The rest: what a snapshot saves must be accepted back as it is.
  ASSERT_OK_AND_ASSIGN(const kvm_sregs sregs, vcpu.get_sregs());
  ASSERT_OK(vcpu.set_sregs(sregs));
  ASSERT_OK_AND_ASSIGN(const kvm_mp_state mp_state, vcpu.get_mp_state());
  ASSERT_OK(vcpu.set_mp_state(mp_state));
  ASSERT_OK_AND_ASSIGN(const kvm_lapic_state lapic, vcpu.get_lapic());
  ASSERT_OK(vcpu.set_lapic(lapic));
  ASSERT_OK_AND_ASSIGN(const kvm_xcrs xcrs, vcpu.get_xcrs());
  ASSERT_OK(vcpu.set_xcrs(xcrs));
  ASSERT_OK_AND_ASSIGN(const kvm_vcpu_events events, vcpu.get_vcpu_events());
  ASSERT_OK(vcpu.set_vcpu_events(events));
}

TEST(KvmState, EveryListedMsrReadsAndWritesBack) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  ASSERT_OK_AND_ASSIGN(const auto supported, t.kvm.supported_cpuid());
  ASSERT_OK(t.vcpu.set_cpuid2(supported));
  ASSERT_OK_AND_ASSIGN(const auto indices, t.kvm.msr_index_list());
  ASSERT_OK_AND_ASSIGN(const auto msrs, t.vcpu.get_msrs(indices));
  ASSERT_EQ(msrs.size(), indices.size());
  for (size_t i = 0; i < msrs.size(); ++i) {
    EXPECT_EQ(msrs[i].index, indices[i]);
  }
  ASSERT_OK(t.vcpu.set_msrs(msrs));

  constexpr uint32_t kMsrIa32SysenterCs = 0x174;
  ASSERT_OK(t.vcpu.set_msrs(
      std::vector<kvm_msr_entry>{{.index = kMsrIa32SysenterCs, .reserved = 0, .data = 0x10}}));
  ASSERT_OK_AND_ASSIGN(const auto sysenter_cs, t.vcpu.get_msrs(std::vector{kMsrIa32SysenterCs}));
  EXPECT_EQ(sysenter_cs.at(0).data, 0x10U);
}

TEST(KvmState, UnknownMsrIsReportedByIndex) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  constexpr uint32_t kNoSuchMsr = 0x4b564dff;  // beyond KVM's paravirtual range
  const auto result = t.vcpu.get_msrs(std::vector<uint32_t>{0x10, kNoSuchMsr});
  ASSERT_FALSE(result.has_value());
  EXPECT_THAT(result.error().message(), HasSubstr("KVM_GET_MSRS(vcpu 0)"));
  EXPECT_THAT(result.error().message(), HasSubstr("0x4b564dff"));
}

TEST(KvmState, VmStateRoundTrips) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  ASSERT_OK_AND_ASSIGN(const kvm_clock_data clock, t.vm.get_clock());
  ASSERT_OK(t.vm.set_clock(clock));
  for (const uint32_t chip_id :
       {KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE, KVM_IRQCHIP_IOAPIC}) {
    ASSERT_OK_AND_ASSIGN(const kvm_irqchip chip, t.vm.get_irqchip(chip_id));
    EXPECT_EQ(chip.chip_id, chip_id);
    ASSERT_OK(t.vm.set_irqchip(chip));
  }
  ASSERT_OK_AND_ASSIGN(const kvm_pit_state2 pit, t.vm.get_pit2());
  ASSERT_OK(t.vm.set_pit2(pit));
  ASSERT_OK(t.vm.irq_line(4, true));
  ASSERT_OK(t.vm.irq_line(4, false));
}

TEST(KvmState, IoEventFdTakesTheWriteWithoutAnExit) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  const std::vector<uint8_t> code = {
      0xba, 0x10, 0x05,  // mov dx, 0x510
      0xb0, 0x01,        // mov al, 1
      0xee,              // out dx, al
      0xf4,              // hlt
  };
  const UniqueFd event = make_eventfd();
  ASSERT_TRUE(event.valid());
  const kvm::IoEventFd ioeventfd{.eventfd = event.get(),
                                 .space = kvm::IoSpace::kPio,
                                 .address = 0x510,
                                 .length = 1,
                                 .datamatch = std::nullopt};
  ASSERT_OK(t.vm.register_ioeventfd(ioeventfd));
  ASSERT_OK(start_real_mode(t, code));
  ASSERT_NO_FATAL_FAILURE(expect_hlt(t.vcpu, kCodeAddress + code.size() - 1));
  uint64_t count = 0;
  ASSERT_EQ(::read(event.get(), &count, sizeof(count)), static_cast<ssize_t>(sizeof(count)));
  EXPECT_EQ(count, 1U);

  // Unregistered, the same OUT comes to the VMM again.
  ASSERT_OK(t.vm.unregister_ioeventfd(ioeventfd));
  ASSERT_OK(start_real_mode(t, code));
  ASSERT_NO_FATAL_FAILURE(expect_out(t.vcpu, 0x510, {0x01}));
}

TEST(KvmState, IrqFdRaisesItsLineInThePic) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.irqchip = true}));
  const UniqueFd event = make_eventfd();
  ASSERT_TRUE(event.valid());
  constexpr uint32_t kGsi = 5;
  ASSERT_OK(t.vm.register_irqfd(event.get(), kGsi));

  const auto twice = t.vm.register_irqfd(event.get(), kGsi);
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().os_errno(), EBUSY);
  EXPECT_THAT(twice.error().message(), HasSubstr("KVM_IRQFD(gsi 5)"));

  // KVM injects from a work queue: wait for the PIC's request register, with a deadline.
  const uint64_t one = 1;
  ASSERT_EQ(::write(event.get(), &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool raised = false;
  while (!raised && std::chrono::steady_clock::now() < deadline) {
    ASSERT_OK_AND_ASSIGN(const kvm_irqchip pic, t.vm.get_irqchip(KVM_IRQCHIP_PIC_MASTER));
    raised = (pic.chip.pic.irr & (1U << kGsi)) != 0;
  }
  EXPECT_TRUE(raised) << "IRQ " << kGsi << " never reached the PIC's IRR";
  ASSERT_OK(t.vm.unregister_irqfd(event.get(), kGsi));
}

TEST(KvmState, DirtyLogShowsThePageTheGuestWrote) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm({.memory_flags = KVM_MEM_LOG_DIRTY_PAGES}));
  const std::vector<uint8_t> code = {
      0xc6, 0x06, 0x00, 0x50, 0x01,  // mov byte [0x5000], 1
      0xf4,                          // hlt
  };
  ASSERT_OK(start_real_mode(t, code));
  ASSERT_NO_FATAL_FAILURE(expect_hlt(t.vcpu, kCodeAddress + code.size() - 1));
  EXPECT_EQ(t.ram.read_byte(0x5000), 1);

  ASSERT_OK_AND_ASSIGN(const auto dirty, t.vm.get_dirty_log(0, t.ram.size()));
  ASSERT_EQ(dirty.size(), t.ram.size() / 4096 / 64);
  EXPECT_TRUE(dirty[0] & (1U << 5)) << std::hex << dirty[0];
  EXPECT_FALSE(dirty[0] & (1U << 6)) << std::hex << dirty[0];
  // Reading the log resets it.
  ASSERT_OK_AND_ASSIGN(const auto again, t.vm.get_dirty_log(0, t.ram.size()));
  EXPECT_FALSE(again[0] & (1U << 5)) << std::hex << again[0];
}

// immediate_exit makes KVM_RUN return at once, but only after it completes the pending
// IN: the state a snapshot would save then has the value in AL and rip past the IN.
TEST(KvmState, ImmediateExitCompletesPendingIoFirst) {
  ASSERT_OK_AND_ASSIGN(TestVm t, create_test_vm());
  const std::vector<uint8_t> code = {
      0xba, 0xf8, 0x03,  // mov dx, 0x3f8
      0xec,              // in al, dx
      0xee,              // out dx, al
      0xf4,              // hlt
  };
  ASSERT_OK(start_real_mode(t, code));
  ASSERT_NO_FATAL_FAILURE(expect_in(t.vcpu, 0x3f8, {0x77}));
  t.vcpu.set_immediate_exit(true);
  kvm::InterruptedExit interrupted{};
  ASSERT_NO_FATAL_FAILURE(run_expecting(t.vcpu, interrupted));
  ASSERT_OK_AND_ASSIGN(const kvm_regs regs, t.vcpu.get_regs());
  EXPECT_EQ(regs.rax & 0xff, 0x77U);
  EXPECT_EQ(regs.rip, kCodeAddress + 4);

  t.vcpu.set_immediate_exit(false);
  ASSERT_NO_FATAL_FAILURE(expect_out(t.vcpu, 0x3f8, {0x77}));
  ASSERT_NO_FATAL_FAILURE(expect_hlt(t.vcpu, kCodeAddress + code.size() - 1));
}

}  // namespace
}  // namespace dsec::test

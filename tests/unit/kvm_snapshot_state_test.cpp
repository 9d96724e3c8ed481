// vCPU and VM snapshot state without KVM: the encoding round-trips and refuses truncated,
// oversized and mislabelled input; the MSR selection, TSC-rate check, MSR restore plan and
// clock restore decide what KVM is asked to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tests/support/result_matchers.h"
#include "vmm/kvm/snapshot_msrs.h"
#include "vmm/kvm/vcpu_state.h"
#include "vmm/kvm/vm_state.h"

namespace dsec::kvm {
namespace {

using ::testing::HasSubstr;

template <typename T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

kvm_msr_entry msr(uint32_t index, uint64_t data) {
  kvm_msr_entry entry{};
  entry.index = index;
  entry.data = data;
  return entry;
}

VcpuState sample_vcpu_state() {
  VcpuState s;
  s.mp_state.mp_state = KVM_MP_STATE_HALTED;
  s.regs.rax = 0x1122334455667788;
  s.regs.rip = 0x1000;
  s.sregs.cr3 = 0x9000;
  s.sregs.efer = 0x500;
  s.xsave.resize(4096 + 64);
  for (size_t i = 0; i < s.xsave.size(); ++i) {
    s.xsave[i] = static_cast<uint8_t>(i * 7);
  }
  s.xcrs.nr_xcrs = 1;
  s.xcrs.xcrs[0].value = 0x7;
  s.debugregs.db[0] = 0x1000;
  s.lapic.regs[0x80] = 0x20;
  s.tsc_khz = 2'999'999;
  for (uint32_t leaf = 0; leaf < 3; ++leaf) {
    kvm_cpuid_entry2 entry{};
    entry.function = leaf;
    entry.eax = leaf * 11;
    s.cpuid.push_back(entry);
  }
  s.msrs = {msr(0x10, 123456), msr(0x174, 0x10), msr(0x6e0, 0), msr(0x4b564d01, 0x5001)};
  s.events.nmi.pending = 1;
  s.events.flags = KVM_VCPUEVENT_VALID_SHADOW;
  return s;
}

VmState sample_vm_state() {
  VmState s;
  s.pit.channels[2].count = 0x1234;
  s.pit.channels[2].mode = 0;
  s.pit.flags = KVM_PIT_FLAGS_HPET_LEGACY;
  s.clock.clock = 1'000'000'000;
  s.clock.flags = KVM_CLOCK_REALTIME | KVM_CLOCK_TSC_STABLE;
  s.clock.realtime = 1'700'000'000'000'000'000;
  s.pic_master.chip_id = KVM_IRQCHIP_PIC_MASTER;
  s.pic_master.chip.pic.imr = 0xfb;
  s.pic_slave.chip_id = KVM_IRQCHIP_PIC_SLAVE;
  s.pic_slave.chip.pic.imr = 0xff;
  s.ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
  s.ioapic.chip.ioapic.redirtbl[3].bits = 0x10033;
  return s;
}

// Where the counts sit in encode(sample_vcpu_state()): each struct byte for byte, arrays
// as a u64 count then the elements.
size_t xsave_count_offset() {
  return sizeof(kvm_mp_state) + sizeof(kvm_regs) + sizeof(kvm_sregs);
}
size_t cpuid_count_offset(const VcpuState& s) {
  return xsave_count_offset() + 8 + s.xsave.size() + sizeof(kvm_xcrs) + sizeof(kvm_debugregs) +
         sizeof(kvm_lapic_state) + sizeof(uint32_t);
}
size_t msrs_count_offset(const VcpuState& s) {
  return cpuid_count_offset(s) + 8 + s.cpuid.size() * sizeof(kvm_cpuid_entry2);
}

std::vector<uint8_t> with_count(std::vector<uint8_t> bytes, size_t offset, uint64_t count) {
  std::memcpy(bytes.data() + offset, &count, sizeof(count));
  return bytes;
}

TEST(KvmSnapshotState, VcpuStateRoundTrips) {
  const VcpuState s = sample_vcpu_state();
  const auto bytes = encode(s);
  EXPECT_EQ(bytes.size(), msrs_count_offset(s) + 8 + s.msrs.size() * sizeof(kvm_msr_entry) +
                              sizeof(kvm_vcpu_events));
  ASSERT_OK_AND_ASSIGN(const VcpuState back, decode_vcpu_state(bytes));
  EXPECT_TRUE(same_bytes(back.mp_state, s.mp_state));
  EXPECT_TRUE(same_bytes(back.regs, s.regs));
  EXPECT_TRUE(same_bytes(back.sregs, s.sregs));
  EXPECT_EQ(back.xsave, s.xsave);
  EXPECT_TRUE(same_bytes(back.xcrs, s.xcrs));
  EXPECT_TRUE(same_bytes(back.debugregs, s.debugregs));
  EXPECT_TRUE(same_bytes(back.lapic, s.lapic));
  EXPECT_EQ(back.tsc_khz, 2'999'999U);
  ASSERT_EQ(back.cpuid.size(), 3U);
  EXPECT_EQ(back.cpuid[2].eax, 22U);
  ASSERT_EQ(back.msrs.size(), 4U);
  EXPECT_EQ(back.msrs[3].index, 0x4b564d01U);
  EXPECT_EQ(back.msrs[3].data, 0x5001U);
  EXPECT_TRUE(same_bytes(back.events, s.events));
  EXPECT_EQ(encode(back), bytes);
}

TEST(KvmSnapshotState, EveryTruncatedVcpuStateFails) {
  const auto bytes = encode(sample_vcpu_state());
  for (size_t size = 0; size < bytes.size(); ++size) {
    const auto result = decode_vcpu_state(std::span(bytes).first(size));
    ASSERT_FALSE(result.has_value()) << "decoded from " << size << " of " << bytes.size();
    EXPECT_THAT(result.error().message(), HasSubstr("snapshot state: truncated while reading"));
  }
  auto longer = bytes;
  longer.push_back(0);
  const auto result = decode_vcpu_state(longer);
  ASSERT_FALSE(result.has_value());
  EXPECT_THAT(result.error().message(), HasSubstr("vcpu state has 1 unexpected trailing bytes"));
}

TEST(KvmSnapshotState, OversizedVcpuCountsFail) {
  const VcpuState s = sample_vcpu_state();
  const auto bytes = encode(s);
  const struct {
    size_t offset;
    uint64_t count;
    const char* message;
  } cases[] = {
      {xsave_count_offset(), 64 * 1024 + 1, "vcpu xsave has 65537 entries, more than the 65536"},
      {xsave_count_offset(), ~0ULL, "vcpu xsave has 18446744073709551615 entries"},
      {cpuid_count_offset(s), 257, "vcpu cpuid has 257 entries, more than the 256 allowed"},
      {msrs_count_offset(s), 1025, "vcpu msrs has 1025 entries, more than the 1024 allowed"},
      // Within the bound but beyond the input.
      {msrs_count_offset(s), 1024, "truncated while reading vcpu msrs"},
  };
  for (const auto& c : cases) {
    const auto result = decode_vcpu_state(with_count(bytes, c.offset, c.count));
    ASSERT_FALSE(result.has_value()) << c.message;
    EXPECT_THAT(result.error().message(), HasSubstr(c.message));
  }
}

TEST(KvmSnapshotState, XsaveShorterThanKvmsAreaFails) {
  VcpuState s = sample_vcpu_state();
  s.xsave.resize(4095);
  const auto result = decode_vcpu_state(encode(s));
  ASSERT_FALSE(result.has_value());
  EXPECT_THAT(result.error().message(),
              HasSubstr("vcpu xsave has 4095 bytes, fewer than the 4096 of KVM's smallest"));
}

TEST(KvmSnapshotState, VmStateRoundTripsAndTruncationsFail) {
  const VmState s = sample_vm_state();
  const auto bytes = encode(s);
  EXPECT_EQ(bytes.size(),
            sizeof(kvm_pit_state2) + sizeof(kvm_clock_data) + 3 * sizeof(kvm_irqchip));
  ASSERT_OK_AND_ASSIGN(const VmState back, decode_vm_state(bytes));
  EXPECT_TRUE(same_bytes(back.pit, s.pit));
  EXPECT_TRUE(same_bytes(back.clock, s.clock));
  EXPECT_TRUE(same_bytes(back.pic_master, s.pic_master));
  EXPECT_TRUE(same_bytes(back.pic_slave, s.pic_slave));
  EXPECT_TRUE(same_bytes(back.ioapic, s.ioapic));
  EXPECT_EQ(encode(back), bytes);

  for (size_t size = 0; size < bytes.size(); ++size) {
    const auto result = decode_vm_state(std::span(bytes).first(size));
    ASSERT_FALSE(result.has_value()) << "decoded from " << size << " of " << bytes.size();
    EXPECT_THAT(result.error().message(), HasSubstr("snapshot state: truncated while reading vm"));
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_vm_state(longer).has_value());
}

TEST(KvmSnapshotState, IrqchipUnderAnotherChipIdFails) {
  VmState s = sample_vm_state();
  s.ioapic.chip_id = KVM_IRQCHIP_PIC_MASTER;
  const auto result = decode_vm_state(encode(s));
  ASSERT_FALSE(result.has_value());
  EXPECT_THAT(result.error().message(),
              HasSubstr("snapshot state: vm ioapic carries chip id 0, not 2"));
}

TEST(KvmSnapshotState, SnapshotMsrsAreTheListedStateMsrsThenTheMtrrs) {
  const std::vector<uint32_t> listed = {
      0x174,       // SYSENTER_CS
      0x8b,        // IA32_UCODE_REV: configuration, not state
      0x10,        // TSC
      0x40000000,  // Hyper-V guest OS id: not exposed to our guests
      0xc0000081,  // STAR
      0xc0010117,  // VM_HSAVE_PA: nested SVM, not state we support
      0x277,       // PAT
      0x6e0,       // TSC_DEADLINE
      0x4b564d05,  // KVM poll control
      0x4b564d06,  // KVM async PF interrupt
      0x10,        // listed twice
      0x3b,        // TSC_ADJUST
      0x2ff,       // MTRRdefType, where a kernel lists it
  };
  const auto selected = select_snapshot_msrs(listed);
  const std::vector<uint32_t> expected_start = {0x174,      0x10,       0xc0000081, 0x277, 0x6e0,
                                                0x4b564d05, 0x4b564d06, 0x3b,       0x2ff};
  ASSERT_GE(selected.size(), expected_start.size());
  EXPECT_EQ(std::vector(selected.begin(), selected.begin() + expected_start.size()),
            expected_start);
  // Then the MTRRs KVM emulates without listing them, 0x2ff not again.
  const std::vector<uint32_t> mtrrs(selected.begin() + expected_start.size(), selected.end());
  EXPECT_EQ(mtrrs.size(), 27U);
  EXPECT_EQ(mtrrs.front(), 0x200U);
  EXPECT_EQ(mtrrs.back(), 0x26fU);
  EXPECT_EQ(std::count(selected.begin(), selected.end(), 0x2ffU), 1);
}

TEST(KvmSnapshotState, SnapshotMsrsCoverTheBoundariesOfEachRange) {
  const std::vector<uint32_t> listed = {
      0x4b564cff, 0x4b564d00, 0x4b564dff, 0x4b564e00, 0x7ff,      0x800, 0x8ff, 0x900,
      0xc000007f, 0xc0000084, 0xc0000085, 0xc0000103, 0xc0000104, 0x173, 0x177, 0xda0};
  const auto selected = select_snapshot_msrs(listed);
  EXPECT_EQ(
      std::vector(selected.begin(), selected.begin() + 7),
      (std::vector<uint32_t>{0x4b564d00, 0x4b564dff, 0x800, 0x8ff, 0xc0000084, 0xc0000103, 0xda0}));
  EXPECT_EQ(selected.size(), 7U + 28U);
}

TEST(KvmSnapshotState, TscRateWithin250PpmNeedsNothing) {
  EXPECT_EQ(tsc_khz_to_set(3'000'000, 3'000'000, false).value(), std::nullopt);
  EXPECT_EQ(tsc_khz_to_set(3'000'750, 3'000'000, false).value(), std::nullopt);  // 250 ppm
  EXPECT_EQ(tsc_khz_to_set(2'999'250, 3'000'000, false).value(), std::nullopt);
  EXPECT_EQ(tsc_khz_to_set(0, 3'000'000, false).value(), std::nullopt);  // rate unknown
  EXPECT_EQ(tsc_khz_to_set(3'000'000, 0, false).value(), std::nullopt);
}

TEST(KvmSnapshotState, TscRateBeyond250PpmIsScaledOrRefused) {
  EXPECT_EQ(tsc_khz_to_set(3'000'751, 3'000'000, true).value(), 3'000'751U);
  EXPECT_EQ(tsc_khz_to_set(2'000'000, 3'000'000, true).value(), 2'000'000U);
  const auto refused = tsc_khz_to_set(2'000'000, 3'000'000, false);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message(),
              HasSubstr("snapshot taken on a host whose TSC runs at 2000000 kHz; this host's "
                        "runs at 3000000 kHz and KVM cannot scale it"));
}

TEST(KvmSnapshotState, TscDeadlineIsRestoredLastAndZeroBecomesTheTsc) {
  const auto plan = plan_msr_restore(std::vector{msr(0x6e0, 0), msr(0x174, 0x10), msr(0x10, 777)});
  ASSERT_EQ(plan.first.size(), 2U);
  EXPECT_EQ(plan.first[0].index, 0x174U);
  EXPECT_EQ(plan.first[1].index, 0x10U);
  ASSERT_EQ(plan.last.size(), 1U);
  EXPECT_EQ(plan.last[0].index, 0x6e0U);
  EXPECT_EQ(plan.last[0].data, 777U);

  const auto armed = plan_msr_restore(std::vector{msr(0x10, 777), msr(0x6e0, 999)});
  ASSERT_EQ(armed.last.size(), 1U);
  EXPECT_EQ(armed.last[0].data, 999U);

  const auto without = plan_msr_restore(std::vector{msr(0x10, 777)});
  EXPECT_EQ(without.first.size(), 1U);
  EXPECT_TRUE(without.last.empty());
}

TEST(KvmSnapshotState, ClockAdvancesByWallTimeOnlyWhereBothSidesCan) {
  const kvm_clock_data saved = sample_vm_state().clock;
  const kvm_clock_data realtime = clock_to_restore(saved, true);
  EXPECT_EQ(realtime.clock, saved.clock);
  EXPECT_EQ(realtime.flags, static_cast<uint32_t>(KVM_CLOCK_REALTIME));
  EXPECT_EQ(realtime.realtime, saved.realtime);

  const kvm_clock_data plain = clock_to_restore(saved, false);
  EXPECT_EQ(plain.clock, saved.clock);
  EXPECT_EQ(plain.flags, 0U);
  EXPECT_EQ(plain.realtime, 0U);

  kvm_clock_data without_realtime = saved;
  without_realtime.flags = KVM_CLOCK_TSC_STABLE;
  EXPECT_EQ(clock_to_restore(without_realtime, true).flags, 0U);
}

}  // namespace
}  // namespace dsec::kvm

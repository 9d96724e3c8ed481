// Decoding kvm_run into a VcpuExit, on hand-made kvm_run pages (no KVM needed).
#include "vmm/kvm/vcpu_exit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <variant>
#include <vector>

namespace dsec::kvm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A zeroed, aligned two-page kvm_run mapping, like the one KVM gives (run + PIO page).
class FakeRun {
 public:
  static constexpr size_t kSize = 8192;
  kvm_run& run() { return *reinterpret_cast<kvm_run*>(words_.data()); }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }

 private:
  std::vector<uint64_t> words_ = std::vector<uint64_t>(kSize / 8);
};

TEST(VcpuExitDecode, PortOutCarriesPortSizeAndTheBytesWritten) {
  FakeRun fake;
  fake.run().exit_reason = KVM_EXIT_IO;
  fake.run().io = {
      .direction = KVM_EXIT_IO_OUT, .size = 2, .port = 0x3f8, .count = 1, .data_offset = 4096};
  fake.bytes()[4096] = 0x34;
  fake.bytes()[4097] = 0x12;
  const auto exit = decode_exit(fake.run(), FakeRun::kSize);
  ASSERT_TRUE(exit.has_value()) << exit.error().message();
  const auto* io = std::get_if<IoExit>(&*exit);
  ASSERT_NE(io, nullptr) << describe(*exit);
  EXPECT_EQ(io->port, 0x3f8);
  EXPECT_EQ(io->direction, IoDirection::kOut);
  EXPECT_EQ(io->size, 2);
  EXPECT_EQ(io->count, 1U);
  EXPECT_THAT(io->data, ElementsAre(0x34, 0x12));
  EXPECT_EQ(describe(*exit), "IO out port 0x3f8 size 2 count 1 data 34 12");
}

TEST(VcpuExitDecode, PortInDataIsWrittenIntoKvmRun) {
  FakeRun fake;
  fake.run().exit_reason = KVM_EXIT_IO;
  fake.run().io = {
      .direction = KVM_EXIT_IO_IN, .size = 1, .port = 0x60, .count = 3, .data_offset = 4096};
  const auto exit = decode_exit(fake.run(), FakeRun::kSize);
  ASSERT_TRUE(exit.has_value()) << exit.error().message();
  const auto& io = std::get<IoExit>(*exit);
  EXPECT_EQ(io.direction, IoDirection::kIn);
  ASSERT_EQ(io.data.size(), 3U);  // REP INSB of 3
  io.data[2] = 0xab;
  EXPECT_EQ(fake.bytes()[4098], 0xab);
}

TEST(VcpuExitDecode, PortIoDataOutsideTheMappingIsAnError) {
  FakeRun fake;
  fake.run().exit_reason = KVM_EXIT_IO;
  fake.run().io = {.direction = KVM_EXIT_IO_OUT,
                   .size = 4,
                   .port = 0x80,
                   .count = 2,
                   .data_offset = FakeRun::kSize - 4};
  const auto exit = decode_exit(fake.run(), FakeRun::kSize);
  ASSERT_FALSE(exit.has_value());
  EXPECT_THAT(exit.error().message(), HasSubstr("malformed KVM_EXIT_IO"));

  fake.run().io.data_offset = ~0ULL;  // no overflow into a small offset
  EXPECT_FALSE(decode_exit(fake.run(), FakeRun::kSize).has_value());
  fake.run().io.data_offset = 4096;
  fake.run().io.size = 3;
  EXPECT_FALSE(decode_exit(fake.run(), FakeRun::kSize).has_value());
}

TEST(VcpuExitDecode, MmioReadAndWrite) {
  FakeRun fake;
  fake.run().exit_reason = KVM_EXIT_MMIO;
  fake.run().mmio.phys_addr = 0xd0000000;
  fake.run().mmio.len = 4;
  fake.run().mmio.is_write = 1;
  fake.run().mmio.data[0] = 0xef;
  fake.run().mmio.data[1] = 0xbe;
  fake.run().mmio.data[2] = 0xad;
  fake.run().mmio.data[3] = 0xde;
  auto exit = decode_exit(fake.run(), FakeRun::kSize);
  ASSERT_TRUE(exit.has_value()) << exit.error().message();
  const auto& write = std::get<MmioExit>(*exit);
  EXPECT_TRUE(write.is_write);
  EXPECT_EQ(write.address, 0xd0000000U);
  EXPECT_THAT(write.data, ElementsAre(0xef, 0xbe, 0xad, 0xde));
  EXPECT_EQ(describe(*exit), "MMIO write 0xd0000000 len 4 data ef be ad de");

  fake.run().mmio.is_write = 0;
  fake.run().mmio.len = 8;
  exit = decode_exit(fake.run(), FakeRun::kSize);
  ASSERT_TRUE(exit.has_value()) << exit.error().message();
  const auto& read = std::get<MmioExit>(*exit);
  EXPECT_FALSE(read.is_write);
  read.data[7] = 0x99;  // the answer goes where KVM reads it on the next KVM_RUN
  EXPECT_EQ(fake.run().mmio.data[7], 0x99);
}

TEST(VcpuExitDecode, MmioLengthBeyondItsBufferIsAnError) {
  FakeRun fake;
  fake.run().exit_reason = KVM_EXIT_MMIO;
  fake.run().mmio.len = 9;
  const auto exit = decode_exit(fake.run(), FakeRun::kSize);
  ASSERT_FALSE(exit.has_value());
  EXPECT_THAT(exit.error().message(), HasSubstr("malformed KVM_EXIT_MMIO"));
}

TEST(VcpuExitDecode, ExitsWithoutIo) {
  FakeRun fake;
  const auto decode = [&fake](uint32_t reason) {
    fake.run().exit_reason = reason;
    auto exit = decode_exit(fake.run(), FakeRun::kSize);
    EXPECT_TRUE(exit.has_value());
    return exit.value_or(OtherExit{~0U});
  };
  EXPECT_TRUE(std::holds_alternative<HltExit>(decode(KVM_EXIT_HLT)));
  EXPECT_TRUE(std::holds_alternative<ShutdownExit>(decode(KVM_EXIT_SHUTDOWN)));
  EXPECT_TRUE(std::holds_alternative<InterruptedExit>(decode(KVM_EXIT_INTR)));
  EXPECT_EQ(exit_name(decode(KVM_EXIT_SHUTDOWN)), "SHUTDOWN");

  fake.run().fail_entry = {.hardware_entry_failure_reason = 0x21, .cpu = 3};
  const VcpuExit fail_entry = decode(KVM_EXIT_FAIL_ENTRY);
  EXPECT_EQ(std::get<FailEntryExit>(fail_entry).hardware_entry_failure_reason, 0x21U);
  EXPECT_EQ(describe(fail_entry), "FAIL_ENTRY reason 0x21 cpu 3");

  fake.run().internal.suberror = KVM_INTERNAL_ERROR_EMULATION;
  fake.run().internal.ndata = 1000;  // bounded by the 16 slots kvm_run has
  EXPECT_EQ(std::get<InternalErrorExit>(decode(KVM_EXIT_INTERNAL_ERROR)).data.size(), 16U);

  // An emulation failure with the instruction's bytes: `lock cmpxchg16b [rsi+0x20]`, as
  // PVM's KVM reported it (docs/kvm-test-bed.md). Its describe() shows the bytes.
  FakeRun emulation;
  emulation.run().exit_reason = KVM_EXIT_INTERNAL_ERROR;
  emulation.run().emulation_failure.suberror = KVM_INTERNAL_ERROR_EMULATION;
  emulation.run().emulation_failure.ndata = 3;
  emulation.run().emulation_failure.flags = KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES;
  emulation.run().emulation_failure.insn_size = 6;
  const uint8_t insn[] = {0xf0, 0x48, 0x0f, 0xc7, 0x4e, 0x20, 0x0f, 0x85};
  std::memcpy(emulation.run().emulation_failure.insn_bytes, insn, sizeof(insn));
  const auto failed = decode_exit(emulation.run(), FakeRun::kSize);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(describe(*failed),
            "INTERNAL_ERROR: KVM could not emulate the guest's instruction (bytes at RIP: f0 48 0f "
            "c7 4e 20)");
  // Without the flag, or with another suberror, the raw words.
  emulation.run().emulation_failure.flags = 0;
  EXPECT_EQ(emulation_failure_bytes(
                std::get<InternalErrorExit>(*decode_exit(emulation.run(), FakeRun::kSize))),
            std::nullopt);
  emulation.run().emulation_failure.flags = KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES;
  emulation.run().internal.suberror = KVM_INTERNAL_ERROR_SIMUL_EX;
  EXPECT_EQ(describe(*decode_exit(emulation.run(), FakeRun::kSize))
                .rfind("INTERNAL_ERROR suberror 2 data [0x1, ", 0),
            0U);

  FakeRun event;
  event.run().exit_reason = KVM_EXIT_SYSTEM_EVENT;
  event.run().system_event.type = KVM_SYSTEM_EVENT_RESET;
  const auto reset = decode_exit(event.run(), FakeRun::kSize);
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(std::get<SystemEventExit>(*reset).type, static_cast<uint32_t>(KVM_SYSTEM_EVENT_RESET));
  EXPECT_EQ(std::get<SystemEventExit>(*reset).data.size(), 1U);  // pre-5.18 "flags"

  EXPECT_EQ(std::get<OtherExit>(decode(KVM_EXIT_X86_BUS_LOCK)).reason,
            static_cast<uint32_t>(KVM_EXIT_X86_BUS_LOCK));
}

TEST(VcpuExitDecode, TooSmallMappingIsAnError) {
  FakeRun fake;
  fake.run().exit_reason = KVM_EXIT_HLT;
  EXPECT_FALSE(decode_exit(fake.run(), sizeof(kvm_run) - 1).has_value());
}

}  // namespace
}  // namespace dsec::kvm

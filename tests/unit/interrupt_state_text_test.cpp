// The interrupt state SIGUSR1 logs for a guest that seems stuck: each vCPU's and the
// IOAPIC's, read from the structures KVM returns.
#include "vmm/kvm/interrupt_state_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace dsec::kvm {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

void set_apic_reg(kvm_lapic_state& lapic, size_t offset, uint32_t value) {
  std::memcpy(reinterpret_cast<char*>(lapic.regs) + offset, &value, sizeof(value));
}

// Sets `vector` in a 256-bit APIC register (IRR at 0x200, ISR at 0x100): word vector/32,
// 16 bytes apart.
void set_vector(kvm_lapic_state& lapic, size_t base, uint32_t vector) {
  uint32_t word = 0;
  const size_t offset = base + 0x10 * (vector / 32);
  std::memcpy(&word, reinterpret_cast<char*>(lapic.regs) + offset, sizeof(word));
  set_apic_reg(lapic, offset, word | (1U << (vector % 32)));
}

TEST(InterruptStateText, AHaltedVcpuWithAPendingVectorShowsItInTheIrr) {
  kvm_regs regs{};
  regs.rip = 0xffffffff81a0c3e1;
  regs.rflags = 0x246;  // IF set
  kvm_mp_state mp{KVM_MP_STATE_HALTED};
  kvm_vcpu_events events{};
  kvm_lapic_state lapic{};
  set_apic_reg(lapic, 0x80, 0x10);                // TPR
  set_apic_reg(lapic, 0x320, (2U << 17) | 0xec);  // LVT timer: TSC deadline, vector 0xec
  set_vector(lapic, 0x200, 0x25);                 // IRR: a virtio interrupt pending
  set_vector(lapic, 0x200, 0xec);
  set_vector(lapic, 0x100, 0x41);  // ISR

  EXPECT_EQ(describe_vcpu_interrupts(regs, mp, events, lapic),
            "rip 0xffffffff81a0c3e1 IF=1 halted; lapic tpr 0x10 irr [0x25 0xec] isr [0x41] "
            "timer tsc-deadline 0xec");
}

TEST(InterruptStateText, NamesTheEventKvmIsInjectingAndAMaskedTimer) {
  kvm_regs regs{};
  regs.rflags = 0x2;  // IF clear
  kvm_mp_state mp{KVM_MP_STATE_RUNNABLE};
  kvm_vcpu_events events{};
  events.interrupt.injected = 1;
  events.interrupt.nr = 0x25;
  events.nmi.pending = 1;
  kvm_lapic_state lapic{};
  set_apic_reg(lapic, 0x320, (1U << 16) | (1U << 17) | 0x30);  // masked, periodic

  const std::string text = describe_vcpu_interrupts(regs, mp, events, lapic);
  EXPECT_THAT(text, HasSubstr("IF=0 runnable; lapic tpr 0x0 irr [] isr [] timer periodic 0x30 "
                              "masked"));
  EXPECT_THAT(text, HasSubstr("; injecting irq 0x25"));
  EXPECT_THAT(text, EndsWith("; nmi pending"));
}

// A halted vCPU whose TSC deadline passed long ago was owed a timer interrupt: the text
// says by how much, so that a stalled guest's dump tells a lost timer from an idle one.
TEST(InterruptStateText, SaysWhetherATscDeadlinePassedOrIsToCome) {
  EXPECT_EQ(describe_tsc_deadline(5000, 0), "deadline disarmed");
  EXPECT_EQ(describe_tsc_deadline(0x2000, 0x1000), "deadline 0x1000 passed 4096 TSC cycles ago");
  EXPECT_EQ(describe_tsc_deadline(0x1000, 0x1000), "deadline 0x1000 passed 0 TSC cycles ago");
  EXPECT_EQ(describe_tsc_deadline(0x1000, 0x3000), "deadline 0x3000 in 8192 TSC cycles");
}

TEST(InterruptStateText, ListsRoutedAndUnmaskedIoapicPinsAndCountsTheRest) {
  kvm_ioapic_state ioapic{};
  ioapic.irr = 0x20;
  for (auto& entry : ioapic.redirtbl) {
    entry.fields.mask = 1;  // KVM's reset state
  }
  ioapic.redirtbl[4].fields.vector = 0x24;
  ioapic.redirtbl[4].fields.mask = 0;
  ioapic.redirtbl[5].fields.vector = 0x25;
  ioapic.redirtbl[5].fields.dest_id = 1;  // routed, but masked: its edges are lost
  ioapic.redirtbl[9].fields.vector = 0x29;
  ioapic.redirtbl[9].fields.trig_mode = 1;
  ioapic.redirtbl[9].fields.remote_irr = 1;
  ioapic.redirtbl[9].fields.mask = 0;

  const std::string text = describe_ioapic(ioapic);
  EXPECT_EQ(text,
            "irr 0x20; pin 4 vector 0x24 edge dest 0x0; pin 5 vector 0x25 edge dest 0x1 MASKED; "
            "pin 9 vector 0x29 level dest 0x0 remote-irr; 21 pins masked and unrouted");
  EXPECT_THAT(text, Not(HasSubstr("pin 0 ")));
}

}  // namespace
}  // namespace dsec::kvm

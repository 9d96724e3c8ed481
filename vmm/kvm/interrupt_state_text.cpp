#include "vmm/kvm/interrupt_state_text.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vm.h"

namespace dsec::kvm {
namespace {

// Local APIC registers (offsets into kvm_lapic_state::regs, SDM vol. 3 table 11-1).
constexpr size_t kApicTpr = 0x80;
constexpr size_t kApicIsr = 0x100;
constexpr size_t kApicIrr = 0x200;
constexpr size_t kApicLvtTimer = 0x320;
constexpr uint32_t kLvtMasked = 1U << 16;
constexpr uint64_t kRflagsIf = 1U << 9;
constexpr uint32_t kLvtTscDeadlineMode = 2;  // LVT timer bits 18:17
constexpr uint32_t kMsrTsc = 0x10;           // IA32_TIME_STAMP_COUNTER
constexpr uint32_t kMsrTscDeadline = 0x6e0;  // IA32_TSC_DEADLINE

uint32_t apic_reg(const kvm_lapic_state& lapic, size_t offset) {
  uint32_t value = 0;
  std::memcpy(&value, reinterpret_cast<const char*>(lapic.regs) + offset, sizeof(value));
  return value;
}

// The vectors set in one of the 256-bit registers (ISR, IRR): eight 32-bit words 16 bytes
// apart. "[0x25 0xec]".
std::string vectors(const kvm_lapic_state& lapic, size_t base) {
  std::string text = "[";
  for (uint32_t word = 0; word < 8; ++word) {
    const uint32_t bits = apic_reg(lapic, base + size_t{0x10} * word);
    for (uint32_t bit = 0; bit < 32; ++bit) {
      if ((bits >> bit) & 1) {
        text += fmt::format("{}{:#x}", text.size() > 1 ? " " : "", word * 32 + bit);
      }
    }
  }
  return text + "]";
}

std::string timer_text(uint32_t lvt) {
  static constexpr const char* kModes[] = {"one-shot", "periodic", "tsc-deadline", "reserved"};
  return fmt::format("{} {:#x}{}", kModes[(lvt >> 17) & 3], lvt & 0xff,
                     (lvt & kLvtMasked) != 0 ? " masked" : "");
}

std::string mp_state_text(uint32_t state) {
  switch (state) {
    case KVM_MP_STATE_RUNNABLE:
      return "runnable";
    case KVM_MP_STATE_UNINITIALIZED:
      return "waiting for INIT";
    case KVM_MP_STATE_INIT_RECEIVED:
      return "waiting for SIPI";
    case KVM_MP_STATE_HALTED:
      return "halted";
    default:
      return fmt::format("mp_state {}", state);
  }
}

std::string events_text(const kvm_vcpu_events& events) {
  std::string text;
  if (events.interrupt.injected != 0) {
    text += fmt::format("; injecting irq {:#x}", events.interrupt.nr);
  }
  if (events.exception.injected != 0 || events.exception.pending != 0) {
    text +=
        fmt::format("; {} exception {}", events.exception.injected != 0 ? "injecting" : "pending",
                    events.exception.nr);
  }
  if (events.nmi.injected != 0 || events.nmi.pending != 0) {
    text += fmt::format("; nmi {}", events.nmi.injected != 0 ? "injecting" : "pending");
  }
  if (events.interrupt.shadow != 0) {
    text += "; interrupt shadow";
  }
  return text;
}

}  // namespace

std::string describe_vcpu_interrupts(const kvm_regs& regs, const kvm_mp_state& mp_state,
                                     const kvm_vcpu_events& events, const kvm_lapic_state& lapic) {
  return fmt::format("rip {:#x} IF={} {}; lapic tpr {:#x} irr {} isr {} timer {}{}", regs.rip,
                     (regs.rflags & kRflagsIf) != 0 ? 1 : 0, mp_state_text(mp_state.mp_state),
                     apic_reg(lapic, kApicTpr) & 0xff, vectors(lapic, kApicIrr),
                     vectors(lapic, kApicIsr), timer_text(apic_reg(lapic, kApicLvtTimer)),
                     events_text(events));
}

std::string describe_tsc_deadline(uint64_t tsc, uint64_t deadline) {
  if (deadline == 0) {
    return "deadline disarmed";
  }
  if (deadline <= tsc) {
    return fmt::format("deadline {:#x} passed {} TSC cycles ago", deadline, tsc - deadline);
  }
  return fmt::format("deadline {:#x} in {} TSC cycles", deadline, deadline - tsc);
}

std::string describe_vcpu_interrupts(const Vcpu& vcpu) {
  auto read = [&]() -> Result<std::string> {
    const kvm_regs regs = DSEC_TRY(vcpu.get_regs());
    const kvm_mp_state mp_state = DSEC_TRY(vcpu.get_mp_state());
    const kvm_vcpu_events events = DSEC_TRY(vcpu.get_vcpu_events());
    const kvm_lapic_state lapic = DSEC_TRY(vcpu.get_lapic());
    std::string text = describe_vcpu_interrupts(regs, mp_state, events, lapic);
    if (((apic_reg(lapic, kApicLvtTimer) >> 17) & 3) == kLvtTscDeadlineMode) {
      const std::array<uint32_t, 2> msrs = {kMsrTsc, kMsrTscDeadline};
      const auto values = vcpu.read_msrs(msrs);
      text += values && values->size() == 2
                  ? "; " + describe_tsc_deadline((*values)[0].data, (*values)[1].data)
                  : std::string("; deadline unreadable");
    }
    return text;
  };
  auto text = read();
  return text ? *text : "unreadable: " + text.error().message();
}

std::string describe_ioapic(const kvm_ioapic_state& ioapic) {
  std::string text = fmt::format("irr {:#x}", ioapic.irr);
  int unrouted = 0;
  for (int pin = 0; pin < KVM_IOAPIC_NUM_PINS; ++pin) {
    const auto& entry = ioapic.redirtbl[pin].fields;
    if (entry.mask != 0 && entry.vector == 0) {
      ++unrouted;
      continue;
    }
    text +=
        fmt::format("; pin {} vector {:#x} {} dest {:#x}{}{}", pin, entry.vector,
                    entry.trig_mode != 0 ? "level" : "edge", entry.dest_id,
                    entry.remote_irr != 0 ? " remote-irr" : "", entry.mask != 0 ? " MASKED" : "");
  }
  return text + fmt::format("; {} pins masked and unrouted", unrouted);
}

std::string describe_ioapic(const Vm& vm) {
  auto chip = vm.get_irqchip(KVM_IRQCHIP_IOAPIC);
  if (!chip) {
    return "unreadable: " + chip.error().message();
  }
  return describe_ioapic(chip->chip.ioapic);
}

}  // namespace dsec::kvm

// encode() and decode_vm_state(), apart from capture and restore so that a fuzz target
// can link them without the rest of vmm/kvm.
#include <fmt/format.h>

#include "vmm/kvm/vm_state.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::kvm {
namespace {

Result<kvm_irqchip> get_irqchip(snapshot::ByteReader& reader, const char* field, uint32_t chip_id) {
  const auto chip = DSEC_TRY(reader.get<kvm_irqchip>(field));
  // restore() writes each chip to the id it carries.
  if (chip.chip_id != chip_id) {
    return fail(
        fmt::format("snapshot state: {} carries chip id {}, not {}", field, chip.chip_id, chip_id),
        "the state file is corrupt or from an incompatible dsec-vmm");
  }
  return chip;
}

}  // namespace

std::vector<uint8_t> encode(const VmState& state) {
  snapshot::ByteWriter writer;
  writer.put(state.pit);
  writer.put(state.clock);
  writer.put(state.pic_master);
  writer.put(state.pic_slave);
  writer.put(state.ioapic);
  return writer.take();
}

Result<VmState> decode_vm_state(std::span<const uint8_t> bytes) {
  snapshot::ByteReader reader(bytes);
  VmState state;
  state.pit = DSEC_TRY(reader.get<kvm_pit_state2>("vm pit"));
  state.clock = DSEC_TRY(reader.get<kvm_clock_data>("vm clock"));
  state.pic_master = DSEC_TRY(get_irqchip(reader, "vm pic master", KVM_IRQCHIP_PIC_MASTER));
  state.pic_slave = DSEC_TRY(get_irqchip(reader, "vm pic slave", KVM_IRQCHIP_PIC_SLAVE));
  state.ioapic = DSEC_TRY(get_irqchip(reader, "vm ioapic", KVM_IRQCHIP_IOAPIC));
  DSEC_TRY(reader.expect_end("vm state"));
  return state;
}

}  // namespace dsec::kvm

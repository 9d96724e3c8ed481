// encode() and decode_vcpu_state(), apart from capture and restore so that a fuzz target
// can link them without the rest of vmm/kvm.
#include <fmt/format.h>

#include "vmm/kvm/vcpu_state.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::kvm {

std::vector<uint8_t> encode(const VcpuState& state) {
  snapshot::ByteWriter writer;
  writer.put(state.mp_state);
  writer.put(state.regs);
  writer.put(state.sregs);
  writer.put_array(std::span<const uint8_t>(state.xsave));
  writer.put(state.xcrs);
  writer.put(state.debugregs);
  writer.put(state.lapic);
  writer.put(state.tsc_khz);
  writer.put_array(std::span<const kvm_cpuid_entry2>(state.cpuid));
  writer.put_array(std::span<const kvm_msr_entry>(state.msrs));
  writer.put(state.events);
  return writer.take();
}

Result<VcpuState> decode_vcpu_state(std::span<const uint8_t> bytes) {
  snapshot::ByteReader reader(bytes);
  VcpuState state;
  state.mp_state = DSEC_TRY(reader.get<kvm_mp_state>("vcpu mp_state"));
  state.regs = DSEC_TRY(reader.get<kvm_regs>("vcpu regs"));
  state.sregs = DSEC_TRY(reader.get<kvm_sregs>("vcpu sregs"));
  state.xsave = DSEC_TRY(reader.get_array<uint8_t>("vcpu xsave", kMaxSnapshotXsaveBytes));
  if (state.xsave.size() < sizeof(kvm_xsave)) {
    return fail(fmt::format("snapshot state: vcpu xsave has {} bytes, fewer than the {} of "
                            "KVM's smallest XSAVE area",
                            state.xsave.size(), sizeof(kvm_xsave)),
                "the state file is corrupt or from an incompatible dsec-vmm");
  }
  state.xcrs = DSEC_TRY(reader.get<kvm_xcrs>("vcpu xcrs"));
  state.debugregs = DSEC_TRY(reader.get<kvm_debugregs>("vcpu debugregs"));
  state.lapic = DSEC_TRY(reader.get<kvm_lapic_state>("vcpu lapic"));
  state.tsc_khz = DSEC_TRY(reader.get<uint32_t>("vcpu tsc_khz"));
  state.cpuid =
      DSEC_TRY(reader.get_array<kvm_cpuid_entry2>("vcpu cpuid", kMaxSnapshotCpuidEntries));
  state.msrs = DSEC_TRY(reader.get_array<kvm_msr_entry>("vcpu msrs", kMaxSnapshotMsrs));
  state.events = DSEC_TRY(reader.get<kvm_vcpu_events>("vcpu events"));
  DSEC_TRY(reader.expect_end("vcpu state"));
  return state;
}

}  // namespace dsec::kvm

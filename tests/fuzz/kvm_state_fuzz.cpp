// libFuzzer target: a hostile state file's vCPU and VM sections into their decoders, both
// as raw bytes and as a valid encoding with the input patched in and cut short (a valid
// vCPU section is longer than libFuzzer's inputs usually are). Anything decoded must
// re-encode to exactly the bytes it came from (the encoding is canonical), and nothing may
// crash.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "vmm/kvm/vcpu_state.h"
#include "vmm/kvm/vm_state.h"

namespace {

template <typename Decode>
void check_round_trip(std::span<const uint8_t> bytes, Decode decode) {
  const auto state = decode(bytes);
  if (!state) return;
  const auto again = dsec::kvm::encode(*state);
  if (!std::ranges::equal(again, bytes)) {
    std::abort();
  }
}

std::vector<uint8_t> valid_vcpu_section() {
  dsec::kvm::VcpuState state;
  state.xsave.resize(4096);
  state.cpuid.resize(2);
  state.msrs.resize(3);
  return dsec::kvm::encode(state);
}

// The input's first 4 bytes say where to write the rest into `base`, the next 4 where to
// cut the result.
std::vector<uint8_t> patched(std::vector<uint8_t> base, std::span<const uint8_t> input) {
  if (input.size() < 8) return base;
  uint32_t at = 0;
  uint32_t cut = 0;
  std::memcpy(&at, input.data(), 4);
  std::memcpy(&cut, input.data() + 4, 4);
  const auto patch = input.subspan(8);
  at %= static_cast<uint32_t>(base.size() + 1);
  if (base.size() < at + patch.size()) base.resize(at + patch.size());
  std::ranges::copy(patch, base.begin() + at);
  base.resize(std::min<size_t>(base.size(), cut));
  return base;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<uint8_t> vcpu_base = valid_vcpu_section();
  static const std::vector<uint8_t> vm_base = dsec::kvm::encode(
      dsec::kvm::VmState{.pit = {},
                         .clock = {},
                         .pic_master = {.chip_id = KVM_IRQCHIP_PIC_MASTER, .pad = 0, .chip = {}},
                         .pic_slave = {.chip_id = KVM_IRQCHIP_PIC_SLAVE, .pad = 0, .chip = {}},
                         .ioapic = {.chip_id = KVM_IRQCHIP_IOAPIC, .pad = 0, .chip = {}}});
  const std::span<const uint8_t> input(data, size);
  check_round_trip(input, dsec::kvm::decode_vcpu_state);
  check_round_trip(input, dsec::kvm::decode_vm_state);
  check_round_trip(patched(vcpu_base, input), dsec::kvm::decode_vcpu_state);
  check_round_trip(patched(vm_base, input), dsec::kvm::decode_vm_state);
  return 0;
}

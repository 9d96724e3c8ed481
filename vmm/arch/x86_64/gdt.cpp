#include "vmm/arch/x86_64/gdt.h"

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

Gdt boot_gdt(BootProtocol protocol) {
  if (protocol == BootProtocol::kPvh) {
    return {0, kGdtCode32, kGdtData, kGdtTssPvh};
  }
  return {0, kGdtCode64, kGdtData, kGdtTss64};
}

kvm_segment segment_from_descriptor(uint64_t descriptor, uint16_t selector) {
  const auto bits = [descriptor](unsigned shift, unsigned width) {
    return static_cast<uint32_t>((descriptor >> shift) & ((1ULL << width) - 1));
  };
  kvm_segment segment{};
  segment.base = bits(16, 24) | (uint64_t{bits(56, 8)} << 24);
  const uint32_t limit = bits(0, 16) | (bits(48, 4) << 16);
  segment.g = static_cast<uint8_t>(bits(55, 1));
  // With G set the limit counts 4 KiB pages, and the low 12 bits read as ones.
  segment.limit = segment.g != 0 ? (limit << 12) | 0xfff : limit;
  segment.selector = selector;
  segment.type = static_cast<uint8_t>(bits(40, 4));
  segment.s = static_cast<uint8_t>(bits(44, 1));
  segment.dpl = static_cast<uint8_t>(bits(45, 2));
  segment.present = static_cast<uint8_t>(bits(47, 1));
  segment.avl = static_cast<uint8_t>(bits(52, 1));
  segment.l = static_cast<uint8_t>(bits(53, 1));
  segment.db = static_cast<uint8_t>(bits(54, 1));
  segment.unusable = segment.present != 0 ? 0 : 1;
  return segment;
}

Status write_gdt_and_idt(GuestMemory& memory, const Gdt& gdt) {
  DSEC_TRY(memory.write_obj(kGdtAddr, gdt));
  return memory.write_obj(kIdtAddr, uint64_t{0});
}

}  // namespace dsec::x86_64

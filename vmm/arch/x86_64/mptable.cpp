#include "vmm/arch/x86_64/mptable.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <span>

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

// What KVM's in-kernel LAPIC and IOAPIC report as their versions.
constexpr uint8_t kLapicVersion = 0x14;
constexpr uint8_t kIoapicVersion = 0x11;
// Family 6 in the processor entries; features: FPU and on-chip APIC.
constexpr uint32_t kCpuSignature = 0x600;
constexpr uint32_t kCpuFeatures = (1 << 0) | (1 << 9);
constexpr uint8_t kIsaBusId = 0;
constexpr uint8_t kAllLapics = 0xff;

template <typename T>
void append(std::vector<uint8_t>& bytes, const T& value) {
  const auto* begin = reinterpret_cast<const uint8_t*>(&value);
  bytes.insert(bytes.end(), begin, begin + sizeof(T));
}

uint8_t checksum(std::span<const uint8_t> bytes) {
  uint8_t sum = 0;
  for (uint8_t byte : bytes) {
    sum = static_cast<uint8_t>(sum + byte);
  }
  return static_cast<uint8_t>(-sum);
}

}  // namespace

Result<std::vector<uint8_t>> make_mptable(uint32_t vcpu_count) {
  if (vcpu_count == 0 || vcpu_count > kMaxVcpus) {
    return fail(fmt::format("an MP table describes 1 to {} vCPUs, not {}", kMaxVcpus, vcpu_count));
  }
  const auto ioapic_id = static_cast<uint8_t>(vcpu_count);
  constexpr uint64_t kHeaderOffset = sizeof(mp::FloatingPointer);

  std::vector<uint8_t> bytes(kHeaderOffset + sizeof(mp::ConfigTableHeader));
  uint16_t entries = 0;
  for (uint32_t id = 0; id < vcpu_count; ++id) {
    const auto flags =
        static_cast<uint8_t>(mp::kCpuEnabled | (id == 0 ? mp::kCpuBootProcessor : 0));
    append(bytes, mp::ProcessorEntry{mp::kEntryProcessor,
                                     static_cast<uint8_t>(id),
                                     kLapicVersion,
                                     flags,
                                     kCpuSignature,
                                     kCpuFeatures,
                                     {0, 0}});
    ++entries;
  }
  append(bytes, mp::BusEntry{mp::kEntryBus, kIsaBusId, {'I', 'S', 'A', ' ', ' ', ' '}});
  append(bytes, mp::IoapicEntry{mp::kEntryIoapic, ioapic_id, kIoapicVersion, 1,
                                static_cast<uint32_t>(kIoapicAddr)});
  entries += 2;
  // ISA IRQ 0 (the PIT) arrives on IOAPIC pin 2, as KVM's default GSI routing wires it;
  // pin 2 has no ISA IRQ of its own (IRQ 2 is the PIC cascade). Every other line, legacy
  // or virtio-mmio, uses the pin of its number.
  for (uint32_t irq = 0; irq < kIoapicPins; ++irq) {
    if (irq == 2) {
      continue;
    }
    const auto pin = static_cast<uint8_t>(irq == 0 ? 2 : irq);
    append(bytes, mp::InterruptEntry{mp::kEntryIoInterrupt, mp::kIrqTypeInt, 0, kIsaBusId,
                                     static_cast<uint8_t>(irq), ioapic_id, pin});
    ++entries;
  }
  // The PIC reaches the boot processor through LINT0 (virtual wire mode); NMI is on LINT1
  // of every processor.
  append(bytes,
         mp::InterruptEntry{mp::kEntryLocalInterrupt, mp::kIrqTypeExtInt, 0, kIsaBusId, 0, 0, 0});
  append(bytes, mp::InterruptEntry{mp::kEntryLocalInterrupt, mp::kIrqTypeNmi, 0, kIsaBusId, 0,
                                   kAllLapics, 1});
  entries += 2;
  if (bytes.size() > kHighMemStart - kMpTableAddr) {
    return fail(fmt::format("the MP table for {} vCPUs needs {} bytes; {} are reserved for it",
                            vcpu_count, bytes.size(), kHighMemStart - kMpTableAddr));
  }

  mp::ConfigTableHeader header{};
  std::memcpy(header.signature, "PCMP", 4);
  header.base_table_length = static_cast<uint16_t>(bytes.size() - kHeaderOffset);
  header.spec_rev = mp::kSpecRev;
  std::memcpy(header.oem_id, "DSEC-VMM", 8);
  std::memcpy(header.product_id, "MICROVM     ", 12);
  header.entry_count = entries;
  header.lapic_address = static_cast<uint32_t>(kLapicAddr);
  std::memcpy(bytes.data() + kHeaderOffset, &header, sizeof(header));
  const std::span<uint8_t> table(bytes.data() + kHeaderOffset, header.base_table_length);
  table[offsetof(mp::ConfigTableHeader, checksum)] = checksum(table);

  mp::FloatingPointer pointer{};
  std::memcpy(pointer.signature, "_MP_", 4);
  pointer.config_table = static_cast<uint32_t>(kMpTableAddr + kHeaderOffset);
  pointer.length = 1;
  pointer.spec_rev = mp::kSpecRev;
  pointer.checksum = 0;
  pointer.checksum =
      checksum(std::span(reinterpret_cast<const uint8_t*>(&pointer), sizeof(pointer)));
  std::memcpy(bytes.data(), &pointer, sizeof(pointer));
  return bytes;
}

Status write_mptable(GuestMemory& memory, uint32_t vcpu_count) {
  const std::vector<uint8_t> bytes = DSEC_TRY(make_mptable(vcpu_count));
  return memory.write(kMpTableAddr, bytes);
}

}  // namespace dsec::x86_64

// The MP table, parsed back from guest memory the way a kernel would read it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "tests/support/result_matchers.h"
#include "vmm/arch/x86_64/layout.h"
#include "vmm/arch/x86_64/mptable.h"

namespace dsec::x86_64 {
namespace {

using ::testing::HasSubstr;

uint8_t byte_sum(const std::vector<uint8_t>& bytes) {
  uint8_t sum = 0;
  for (const uint8_t b : bytes) {
    sum = static_cast<uint8_t>(sum + b);
  }
  return sum;
}

template <typename T>
T at(const std::vector<uint8_t>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

struct ParsedTable {
  std::vector<mp::ProcessorEntry> processors;
  std::vector<mp::BusEntry> buses;
  std::vector<mp::IoapicEntry> ioapics;
  std::vector<mp::InterruptEntry> io_interrupts;
  std::vector<mp::InterruptEntry> local_interrupts;
  uint16_t entry_count = 0;
  uint32_t lapic_address = 0;
};

// Finds the floating pointer where Linux looks, checks both checksums and walks every entry.
ParsedTable parse(const GuestMemory& memory) {
  ParsedTable table;
  std::vector<uint8_t> pointer_bytes(sizeof(mp::FloatingPointer));
  EXPECT_TRUE(memory.read(kMpTableAddr, pointer_bytes).has_value());
  const auto pointer = at<mp::FloatingPointer>(pointer_bytes, 0);
  EXPECT_EQ(std::memcmp(pointer.signature, "_MP_", 4), 0);
  EXPECT_EQ(byte_sum(pointer_bytes), 0) << "floating pointer checksum";
  EXPECT_EQ(pointer.length, 1);
  EXPECT_EQ(pointer.spec_rev, 4);
  EXPECT_EQ(pointer.features[0], 0) << "a configuration table follows, no default configuration";

  std::vector<uint8_t> header_bytes(sizeof(mp::ConfigTableHeader));
  EXPECT_TRUE(memory.read(pointer.config_table, header_bytes).has_value());
  const auto header = at<mp::ConfigTableHeader>(header_bytes, 0);
  EXPECT_EQ(std::memcmp(header.signature, "PCMP", 4), 0);
  EXPECT_EQ(header.spec_rev, 4);
  std::vector<uint8_t> bytes(header.base_table_length);
  EXPECT_TRUE(memory.read(pointer.config_table, bytes).has_value());
  EXPECT_EQ(byte_sum(bytes), 0) << "configuration table checksum";
  EXPECT_LE(pointer.config_table + bytes.size(), kHighMemStart) << "inside the reserved area";
  table.entry_count = header.entry_count;
  table.lapic_address = header.lapic_address;

  size_t offset = sizeof(mp::ConfigTableHeader);
  for (uint16_t i = 0; i < header.entry_count && offset < bytes.size(); ++i) {
    switch (bytes[offset]) {
      case mp::kEntryProcessor:
        table.processors.push_back(at<mp::ProcessorEntry>(bytes, offset));
        offset += sizeof(mp::ProcessorEntry);
        break;
      case mp::kEntryBus:
        table.buses.push_back(at<mp::BusEntry>(bytes, offset));
        offset += 8;
        break;
      case mp::kEntryIoapic:
        table.ioapics.push_back(at<mp::IoapicEntry>(bytes, offset));
        offset += 8;
        break;
      case mp::kEntryIoInterrupt:
        table.io_interrupts.push_back(at<mp::InterruptEntry>(bytes, offset));
        offset += 8;
        break;
      case mp::kEntryLocalInterrupt:
        table.local_interrupts.push_back(at<mp::InterruptEntry>(bytes, offset));
        offset += 8;
        break;
      default:
        ADD_FAILURE() << "unknown entry type " << int{bytes[offset]} << " at " << offset;
        return table;
    }
  }
  EXPECT_EQ(offset, bytes.size()) << "entries fill the table exactly";
  return table;
}

class X86MpTable : public ::testing::TestWithParam<uint32_t> {};

TEST_P(X86MpTable, DescribesEveryVcpuTheIoapicAndTheIrqWiring) {
  const uint32_t vcpus = GetParam();
  auto memory = GuestMemory::anonymous(ram_regions(64 * kMiB).value()).value();
  ASSERT_OK(write_mptable(memory, vcpus));
  const ParsedTable table = parse(memory);

  EXPECT_EQ(table.lapic_address, kLapicAddr);
  ASSERT_EQ(table.processors.size(), vcpus);
  for (uint32_t i = 0; i < vcpus; ++i) {
    const mp::ProcessorEntry& cpu = table.processors[i];
    EXPECT_EQ(cpu.lapic_id, i);
    EXPECT_NE(cpu.cpu_flags & mp::kCpuEnabled, 0);
    EXPECT_EQ((cpu.cpu_flags & mp::kCpuBootProcessor) != 0, i == 0) << "only vCPU 0 is the BSP";
  }
  ASSERT_EQ(table.buses.size(), 1u);
  EXPECT_EQ(std::memcmp(table.buses[0].bus_type, "ISA   ", 6), 0);
  ASSERT_EQ(table.ioapics.size(), 1u);
  const mp::IoapicEntry ioapic = table.ioapics[0];
  EXPECT_EQ(ioapic.ioapic_id, vcpus) << "the IOAPIC's ID follows the vCPUs'";
  EXPECT_EQ(ioapic.address, kIoapicAddr);
  EXPECT_EQ(ioapic.flags & 1, 1);

  // IRQ -> IOAPIC pin: ISA IRQ 0 on pin 2, every other line on its own pin.
  std::map<uint8_t, uint8_t> pin_of;
  for (const mp::InterruptEntry& entry : table.io_interrupts) {
    EXPECT_EQ(entry.irq_type, mp::kIrqTypeInt);
    EXPECT_EQ(entry.source_bus, table.buses[0].bus_id);
    EXPECT_EQ(entry.dest_apic, ioapic.ioapic_id);
    EXPECT_TRUE(pin_of.emplace(entry.source_irq, entry.dest_pin).second) << "one entry per IRQ";
  }
  EXPECT_EQ(pin_of.at(0), 2);
  EXPECT_EQ(pin_of.count(2), 0u);
  for (uint8_t irq = 1; irq < 16; ++irq) {
    if (irq != 2) {
      EXPECT_EQ(pin_of.at(irq), irq);
    }
  }
  for (uint32_t device = 0; device < kMaxVirtioMmioDevices; ++device) {
    const uint32_t irq = virtio_mmio_slot(device).irq;
    EXPECT_EQ(pin_of.at(static_cast<uint8_t>(irq)), irq);
  }

  ASSERT_EQ(table.local_interrupts.size(), 2u);
  EXPECT_EQ(table.local_interrupts[0].irq_type, mp::kIrqTypeExtInt);
  EXPECT_EQ(table.local_interrupts[0].dest_pin, 0) << "LINT0";
  EXPECT_EQ(table.local_interrupts[1].irq_type, mp::kIrqTypeNmi);
  EXPECT_EQ(table.local_interrupts[1].dest_pin, 1) << "LINT1";
  EXPECT_EQ(table.local_interrupts[1].dest_apic, 0xff) << "every CPU";

  EXPECT_EQ(table.entry_count, vcpus + 1 + 1 + table.io_interrupts.size() + 2);
}

INSTANTIATE_TEST_SUITE_P(VcpuCounts, X86MpTable, ::testing::Values(1u, 2u, 7u, 64u, kMaxVcpus));

TEST(X86MpTableLimits, ZeroOrTooManyVcpusIsAnError) {
  EXPECT_THAT(make_mptable(0).error().message(), HasSubstr("1 to 254 vCPUs, not 0"));
  EXPECT_THAT(make_mptable(kMaxVcpus + 1).error().message(), HasSubstr("not 255"));
}

TEST(X86MpTableLimits, FloatingPointerIsWhereLinuxScans) {
  // Linux scans the last KiB of base memory (639 KiB) in 16-byte steps.
  EXPECT_EQ(kMpTableAddr, 639u * 1024);
  EXPECT_EQ(kMpTableAddr % 16, 0u);
}

}  // namespace
}  // namespace dsec::x86_64

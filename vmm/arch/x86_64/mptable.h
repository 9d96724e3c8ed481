// The MP table (Intel MultiProcessor Specification 1.4): how a guest without ACPI learns
// its vCPUs, its IOAPIC and the wiring of interrupt lines.
#pragma once

#include <cstdint>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

namespace mp {

inline constexpr uint8_t kSpecRev = 4;  // 1.4
inline constexpr uint8_t kEntryProcessor = 0;
inline constexpr uint8_t kEntryBus = 1;
inline constexpr uint8_t kEntryIoapic = 2;
inline constexpr uint8_t kEntryIoInterrupt = 3;
inline constexpr uint8_t kEntryLocalInterrupt = 4;
inline constexpr uint8_t kIrqTypeInt = 0;
inline constexpr uint8_t kIrqTypeNmi = 1;
inline constexpr uint8_t kIrqTypeExtInt = 3;
inline constexpr uint8_t kCpuEnabled = 1 << 0;
inline constexpr uint8_t kCpuBootProcessor = 1 << 1;

struct [[gnu::packed]] FloatingPointer {
  char signature[4];  // "_MP_"
  uint32_t config_table;
  uint8_t length;  // in 16-byte units: 1
  uint8_t spec_rev;
  uint8_t checksum;
  uint8_t features[5];  // all zero: a configuration table is present; virtual wire mode
};

struct [[gnu::packed]] ConfigTableHeader {
  char signature[4];  // "PCMP"
  uint16_t base_table_length;
  uint8_t spec_rev;
  uint8_t checksum;
  char oem_id[8];
  char product_id[12];
  uint32_t oem_table;
  uint16_t oem_table_size;
  uint16_t entry_count;
  uint32_t lapic_address;
  uint16_t extended_table_length;
  uint8_t extended_table_checksum;
  uint8_t reserved;
};

struct [[gnu::packed]] ProcessorEntry {
  uint8_t type;
  uint8_t lapic_id;
  uint8_t lapic_version;
  uint8_t cpu_flags;
  uint32_t cpu_signature;
  uint32_t feature_flags;
  uint32_t reserved[2];
};

struct [[gnu::packed]] BusEntry {
  uint8_t type;
  uint8_t bus_id;
  char bus_type[6];
};

struct [[gnu::packed]] IoapicEntry {
  uint8_t type;
  uint8_t ioapic_id;
  uint8_t ioapic_version;
  uint8_t flags;  // bit 0: enabled
  uint32_t address;
};

// Shared by IO interrupt (type 3) and local interrupt (type 4) assignment entries.
struct [[gnu::packed]] InterruptEntry {
  uint8_t type;
  uint8_t irq_type;
  uint16_t irq_flags;  // 0: polarity and trigger conform to the bus
  uint8_t source_bus;
  uint8_t source_irq;
  uint8_t dest_apic;  // IOAPIC ID, or a local APIC ID (0xff: all)
  uint8_t dest_pin;   // IOAPIC pin, or LINT0/LINT1
};

static_assert(sizeof(FloatingPointer) == 16);
static_assert(sizeof(ConfigTableHeader) == 44);
static_assert(sizeof(ProcessorEntry) == 20);
static_assert(sizeof(BusEntry) == 8 && sizeof(IoapicEntry) == 8 && sizeof(InterruptEntry) == 8);

}  // namespace mp

// The table for `vcpu_count` vCPUs (APIC IDs 0..n-1, the boot processor 0), as bytes to
// be placed at kMpTableAddr: the floating pointer, then the configuration table with one
// ISA bus, the IOAPIC (ID n), an IO interrupt entry for every IOAPIC pin in use and
// ExtINT/NMI on LINT0/LINT1. Fails for 0 vCPUs or more than kMaxVcpus.
Result<std::vector<uint8_t>> make_mptable(uint32_t vcpu_count);
Status write_mptable(GuestMemory& memory, uint32_t vcpu_count);

}  // namespace dsec::x86_64

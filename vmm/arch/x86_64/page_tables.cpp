#include "vmm/arch/x86_64/page_tables.h"

#include <array>

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

constexpr uint64_t kPresent = 1ULL << 0;
constexpr uint64_t kWritable = 1ULL << 1;
constexpr uint64_t kPageSize2M = 1ULL << 7;  // PS: this PD entry maps a 2 MiB page
constexpr uint64_t kEntries = 512;

static_assert(kIdentityMapSize == kEntries * (2 * kMiB), "one PD of 2 MiB pages");

}  // namespace

Status write_identity_page_tables(GuestMemory& memory) {
  std::array<uint64_t, kEntries> table{};
  table[0] = kPdptAddr | kPresent | kWritable;
  DSEC_TRY(memory.write_obj(kPml4Addr, table));
  table[0] = kPdAddr | kPresent | kWritable;
  DSEC_TRY(memory.write_obj(kPdptAddr, table));
  for (uint64_t i = 0; i < kEntries; ++i) {
    table[i] = (i * 2 * kMiB) | kPresent | kWritable | kPageSize2M;
  }
  return memory.write_obj(kPdAddr, table);
}

}  // namespace dsec::x86_64

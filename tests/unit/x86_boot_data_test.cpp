// The boot data the kernel reads at its entry point: command line, zero page or
// hvm_start_info, e820/memmap, GDT and page tables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/unit/x86_kernel_images.h"
#include "vmm/arch/x86_64/boot.h"
#include "vmm/arch/x86_64/boot_params.h"
#include "vmm/arch/x86_64/e820.h"
#include "vmm/arch/x86_64/gdt.h"
#include "vmm/arch/x86_64/layout.h"
#include "vmm/arch/x86_64/pvh.h"

namespace dsec::x86_64 {
namespace {

using ::testing::HasSubstr;

GuestMemory make_memory(uint64_t bytes = 64 * kMiB) {
  return std::move(GuestMemory::anonymous(ram_regions(bytes).value()).value());
}

LoadedKernel load(GuestMemory& memory, const std::vector<uint8_t>& image) {
  return load_kernel(memory, image).value();
}

std::string read_cmdline(const GuestMemory& memory) {
  std::string cmdline;
  for (uint64_t addr = kCmdlineAddr;; ++addr) {
    const char c = static_cast<char>(memory.read_obj<uint8_t>(addr).value());
    if (c == 0) {
      return cmdline;
    }
    cmdline.push_back(c);
  }
}

TEST(X86BootData, ZeroPageForABzImage) {
  GuestMemory memory = make_memory();
  const LoadedKernel kernel = load(memory, test::make_bzimage({.init_size = 0x400000}));
  const GuestRange initrd{48 * kMiB, 0x12345};
  ASSERT_OK(write_boot_data(memory, kernel, {"console=ttyS0 reboot=k", initrd, 2}));

  EXPECT_EQ(read_cmdline(memory), "console=ttyS0 reboot=k");
  ASSERT_OK_AND_ASSIGN(const boot_params params, memory.read_obj<boot_params>(kZeroPageAddr));
  EXPECT_EQ(+params.hdr.boot_flag, 0xaa55);
  EXPECT_EQ(+params.hdr.header, 0x53726448u);
  EXPECT_EQ(+params.hdr.type_of_loader, 0xff);
  EXPECT_EQ(+params.hdr.loadflags & (LOADED_HIGH | CAN_USE_HEAP), LOADED_HIGH | CAN_USE_HEAP);
  EXPECT_EQ(+params.hdr.cmd_line_ptr, kCmdlineAddr);
  EXPECT_EQ(+params.ext_cmd_line_ptr, 0u);
  EXPECT_EQ(+params.hdr.ramdisk_image, 48 * kMiB);
  EXPECT_EQ(+params.hdr.ramdisk_size, 0x12345u);
  EXPECT_EQ(+params.ext_ramdisk_image, 0u);
  // The kernel's own header fields travel in the zero page.
  EXPECT_EQ(+params.hdr.version, 0x020f);
  EXPECT_EQ(+params.hdr.init_size, 0x400000u);
  EXPECT_EQ(+params.hdr.xloadflags, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
  EXPECT_EQ(+params.hdr.pref_address, 0x1000000u);
  // The e820 table is the map of guest memory.
  const auto expected = e820_map(memory);
  ASSERT_EQ(size_t{params.e820_entries}, expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(uint64_t{params.e820_table[i].addr}, uint64_t{expected[i].addr});
    EXPECT_EQ(uint64_t{params.e820_table[i].size}, uint64_t{expected[i].size});
    EXPECT_EQ(uint32_t{params.e820_table[i].type}, uint32_t{expected[i].type});
  }
  EXPECT_EQ(+params.sentinel, 0);
}

TEST(X86BootData, ZeroPageForAnElfVmlinuxHasAMinimalHeader) {
  GuestMemory memory = make_memory();
  const LoadedKernel kernel = load(
      memory, test::ElfImage().entry(16 * kMiB).load(16 * kMiB, test::pattern(0x100, 1)).build());
  ASSERT_OK(write_boot_data(memory, kernel, {"quiet", std::nullopt, 1}));
  ASSERT_OK_AND_ASSIGN(const boot_params params, memory.read_obj<boot_params>(kZeroPageAddr));
  EXPECT_EQ(+params.hdr.boot_flag, 0xaa55);
  EXPECT_EQ(+params.hdr.header, 0x53726448u);
  EXPECT_EQ(+params.hdr.type_of_loader, 0xff);
  EXPECT_EQ(+params.hdr.cmd_line_ptr, kCmdlineAddr);
  EXPECT_EQ(+params.hdr.ramdisk_image, 0u);
  EXPECT_EQ(+params.hdr.ramdisk_size, 0u);
  EXPECT_GT(+params.e820_entries, 0);
}

TEST(X86BootData, RamdiskAndCommandLineAbove4GiBUseTheExtFields) {
  LoadedKernel kernel;
  kernel.cmdline_max = 100;
  const std::array<boot_e820_entry, 1> e820{{{0, 64 * kMiB, kE820Ram}}};
  ASSERT_OK_AND_ASSIGN(
      const boot_params params,
      make_boot_params(kernel, 0x123456000, GuestRange{0x234567000, 0x100000001}, e820));
  EXPECT_EQ(+params.hdr.cmd_line_ptr, 0x23456000u);
  EXPECT_EQ(+params.ext_cmd_line_ptr, 0x1u);
  EXPECT_EQ(+params.hdr.ramdisk_image, 0x34567000u);
  EXPECT_EQ(+params.ext_ramdisk_image, 0x2u);
  EXPECT_EQ(+params.hdr.ramdisk_size, 0x1u);
  EXPECT_EQ(+params.ext_ramdisk_size, 0x1u);
}

TEST(X86BootData, MoreE820EntriesThanTheZeroPageHoldsIsAnError) {
  const std::vector<boot_e820_entry> e820(E820_MAX_ENTRIES_ZEROPAGE + 1, {0, 0x1000, kE820Ram});
  EXPECT_THAT(make_boot_params(LoadedKernel{}, kCmdlineAddr, std::nullopt, e820).error().message(),
              HasSubstr("129 entries; the zero page holds 128"));
}

TEST(X86BootData, CommandLineLongerThanTheKernelTakesIsAnError) {
  GuestMemory memory = make_memory();
  const LoadedKernel bzimage = load(memory, test::make_bzimage({.cmdline_size = 255}));
  const std::string at_limit(255, 'x');
  ASSERT_OK(write_boot_data(memory, bzimage, {at_limit, std::nullopt, 1}));
  EXPECT_EQ(read_cmdline(memory), at_limit);
  const auto too_long = write_boot_data(memory, bzimage, {std::string(256, 'x'), std::nullopt, 1});
  ASSERT_FALSE(too_long.has_value());
  EXPECT_THAT(too_long.error().message(),
              HasSubstr("the kernel command line is 256 bytes; the limit is 255 bytes"));
  // The same check on its own, as the VMM makes it before any KVM call.
  EXPECT_TRUE(check_boot_data(bzimage, {at_limit, std::nullopt, 1}).has_value());
  EXPECT_THAT(check_boot_data(bzimage, {std::string(256, 'x'), std::nullopt, 1}).error().message(),
              HasSubstr("the kernel command line is 256 bytes; the limit is 255 bytes"));

  // Without a header saying otherwise, Linux's own limit of 2048 bytes with the NUL.
  const LoadedKernel elf = load(
      memory, test::ElfImage().entry(16 * kMiB).load(16 * kMiB, test::pattern(0x10, 1)).build());
  EXPECT_TRUE(write_boot_data(memory, elf, {std::string(2047, 'y'), std::nullopt, 1}).has_value());
  EXPECT_THAT(
      write_boot_data(memory, elf, {std::string(2048, 'y'), std::nullopt, 1}).error().message(),
      HasSubstr("the limit is 2047 bytes"));
}

TEST(X86BootData, CommandLineWithANulIsAnError) {
  GuestMemory memory = make_memory();
  const LoadedKernel kernel = load(memory, test::make_bzimage());
  const std::string cmdline("a\0b", 3);
  EXPECT_THAT(write_boot_data(memory, kernel, {cmdline, std::nullopt, 1}).error().message(),
              HasSubstr("NUL"));
  EXPECT_THAT(check_boot_data(kernel, {cmdline, std::nullopt, 1}).error().message(),
              HasSubstr("NUL"));
}

TEST(X86BootData, IdentityPageTablesMapTheFirstGiB) {
  GuestMemory memory = make_memory();
  const LoadedKernel kernel = load(memory, test::make_bzimage());
  ASSERT_OK(write_boot_data(memory, kernel, {"", std::nullopt, 1}));
  ASSERT_OK_AND_ASSIGN(const auto pml4, (memory.read_obj<std::array<uint64_t, 512>>(kPml4Addr)));
  ASSERT_OK_AND_ASSIGN(const auto pdpt, (memory.read_obj<std::array<uint64_t, 512>>(kPdptAddr)));
  ASSERT_OK_AND_ASSIGN(const auto pd, (memory.read_obj<std::array<uint64_t, 512>>(kPdAddr)));
  EXPECT_EQ(pml4[0], kPdptAddr | 0x3);
  EXPECT_EQ(pdpt[0], kPdAddr | 0x3);
  for (size_t i = 1; i < 512; ++i) {
    EXPECT_EQ(pml4[i], 0u);
    EXPECT_EQ(pdpt[i], 0u);
  }
  // Walk a few addresses through the tables: each maps to itself.
  for (const uint64_t address : {uint64_t{0}, kMiB + 0x200, kZeroPageAddr, uint64_t{0x3fffffff}}) {
    const uint64_t pde = pd[(address >> 21) & 511];
    EXPECT_EQ(pde & 0x83, 0x83u) << "present, writable, 2 MiB page";
    EXPECT_EQ((pde & ~0xfffULL) | (address & 0x1fffff), address);
  }
}

TEST(X86BootData, GdtIsWrittenForTheEntryMode) {
  GuestMemory memory = make_memory();
  const LoadedKernel kernel = load(memory, test::make_bzimage());
  ASSERT_OK(write_boot_data(memory, kernel, {"", std::nullopt, 1}));
  ASSERT_OK_AND_ASSIGN(const auto gdt, (memory.read_obj<std::array<uint64_t, 4>>(kGdtAddr)));
  EXPECT_EQ(gdt, (std::array<uint64_t, 4>{0, 0x00af9b000000ffff, 0x00cf93000000ffff,
                                          0x008f8b000000ffff}));
  ASSERT_OK_AND_ASSIGN(const uint64_t idt, memory.read_obj<uint64_t>(kIdtAddr));
  EXPECT_EQ(idt, 0u);

  GuestMemory pvh_memory = make_memory();
  const LoadedKernel pvh = load(pvh_memory, test::ElfImage()
                                                .entry(16 * kMiB)
                                                .load(16 * kMiB, test::pattern(0x100, 1))
                                                .pvh_note(16 * kMiB + 0x10)
                                                .build());
  ASSERT_OK(write_boot_data(pvh_memory, pvh, {"", std::nullopt, 1}));
  ASSERT_OK_AND_ASSIGN(const auto pvh_gdt,
                       (pvh_memory.read_obj<std::array<uint64_t, 4>>(kGdtAddr)));
  EXPECT_EQ(pvh_gdt[1], 0x00cf9b000000ffffu);  // 32-bit code
  EXPECT_EQ(pvh_gdt[2], 0x00cf93000000ffffu);
}

TEST(X86BootData, HvmStartInfoForAPvhKernel) {
  GuestMemory memory = make_memory(5 * kGiB);
  const LoadedKernel kernel = load(memory, test::ElfImage()
                                               .entry(16 * kMiB)
                                               .load(16 * kMiB, test::pattern(0x100, 1))
                                               .pvh_note(16 * kMiB + 0x10)
                                               .build());
  ASSERT_EQ(kernel.protocol, BootProtocol::kPvh);
  const GuestRange initrd{100 * kMiB, 0x5000};
  ASSERT_OK(write_boot_data(memory, kernel, {"console=hvc0", initrd, 4}));

  ASSERT_OK_AND_ASSIGN(const hvm_start_info info,
                       memory.read_obj<hvm_start_info>(kPvhStartInfoAddr));
  EXPECT_EQ(info.magic, 0x336ec578u);
  EXPECT_EQ(info.version, 1u);
  EXPECT_EQ(info.flags, 0u);
  EXPECT_EQ(info.cmdline_paddr, kCmdlineAddr);
  EXPECT_EQ(read_cmdline(memory), "console=hvc0");
  EXPECT_EQ(info.rsdp_paddr, 0u);
  ASSERT_EQ(info.nr_modules, 1u);
  ASSERT_OK_AND_ASSIGN(const hvm_modlist_entry module,
                       memory.read_obj<hvm_modlist_entry>(info.modlist_paddr));
  EXPECT_EQ(module.paddr, 100 * kMiB);
  EXPECT_EQ(module.size, 0x5000u);
  EXPECT_EQ(module.cmdline_paddr, 0u);

  const auto expected = e820_map(memory);
  ASSERT_EQ(info.memmap_entries, expected.size());
  uint64_t ram = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(const hvm_memmap_table_entry entry,
                         memory.read_obj<hvm_memmap_table_entry>(
                             info.memmap_paddr + i * sizeof(hvm_memmap_table_entry)));
    EXPECT_EQ(entry.addr, uint64_t{expected[i].addr});
    EXPECT_EQ(entry.size, uint64_t{expected[i].size});
    EXPECT_EQ(entry.type, uint32_t{expected[i].type});
    EXPECT_EQ(entry.reserved, 0u);
    ram += entry.type == kE820Ram ? entry.size : 0;
  }
  EXPECT_EQ(ram, 5 * kGiB - (kHighMemStart - kMpTableAddr));
  // No zero page for PVH.
  ASSERT_OK_AND_ASSIGN(const uint16_t boot_flag, memory.read_obj<uint16_t>(kZeroPageAddr + 0x1fe));
  EXPECT_EQ(boot_flag, 0u);
}

TEST(X86BootData, PvhWithoutInitrdHasNoModules) {
  GuestMemory memory = make_memory();
  const LoadedKernel kernel = load(memory, test::ElfImage()
                                               .entry(16 * kMiB)
                                               .load(16 * kMiB, test::pattern(0x100, 1))
                                               .pvh_note(16 * kMiB)
                                               .build());
  ASSERT_OK(write_boot_data(memory, kernel, {"", std::nullopt, 1}));
  ASSERT_OK_AND_ASSIGN(const hvm_start_info info,
                       memory.read_obj<hvm_start_info>(kPvhStartInfoAddr));
  EXPECT_EQ(info.nr_modules, 0u);
  EXPECT_EQ(info.modlist_paddr, 0u);
}

}  // namespace
}  // namespace dsec::x86_64

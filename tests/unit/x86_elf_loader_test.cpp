// Loading an ELF64 vmlinux, and refusing every malformed one with an error that says why.
#include <elf.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/unit/x86_kernel_images.h"
#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {
namespace {

using test::ElfImage;
using test::modify_phdr;
using test::pattern;
using test::read_guest;
using test::write_file;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kText = 16 * kMiB;  // where x86-64 vmlinux links its first segment

GuestMemory make_memory(uint64_t bytes = 64 * kMiB) {
  return std::move(GuestMemory::anonymous(ram_regions(bytes).value()).value());
}

std::string load_error(GuestMemory& memory, const std::vector<uint8_t>& image) {
  const auto kernel = load_kernel(memory, image);
  return kernel.has_value() ? std::string("loaded") : kernel.error().message();
}

TEST(X86ElfLoader, LoadsSegmentsAtTheirPhysicalAddressesAndZeroesBss) {
  GuestMemory memory = make_memory();
  // Dirty the bss area first: the loader must clear it, not rely on fresh memory.
  ASSERT_OK(memory.fill(kText + 0x3000, 0x1000, 0xee));
  const auto text = pattern(0x3000, 1);
  const auto data = pattern(0x800, 2);
  const auto image =
      ElfImage().entry(kText + 0x40).load(kText, text, 0x4000).load(kText + 0x10000, data).build();

  ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel(memory, image));
  EXPECT_EQ(kernel.protocol, BootProtocol::kLinux64);
  EXPECT_EQ(kernel.entry, kText + 0x40);
  EXPECT_EQ(kernel.extent, (GuestRange{kText, 0x10800}));
  EXPECT_FALSE(kernel.setup.has_value());
  EXPECT_EQ(kernel.cmdline_max, kCmdlineMaxSize - 1);
  EXPECT_EQ(read_guest(memory, kText, text.size()), text);
  EXPECT_EQ(read_guest(memory, kText + 0x3000, 0x1000), std::vector<uint8_t>(0x1000, 0));
  EXPECT_EQ(read_guest(memory, kText + 0x10000, data.size()), data);
}

TEST(X86ElfLoader, PvhNoteSelectsThePvhEntryPoint) {
  for (const size_t note_size : {size_t{8}, size_t{4}}) {
    SCOPED_TRACE(note_size);
    GuestMemory memory = make_memory();
    const auto image = ElfImage()
                           .entry(kText)
                           .load(kText, pattern(0x2000, 3))
                           .note("Linux", 1, {1, 2, 3})
                           .pvh_note(kText + 0x1234, note_size)
                           .build();
    ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel(memory, image));
    EXPECT_EQ(kernel.protocol, BootProtocol::kPvh);
    EXPECT_EQ(kernel.entry, kText + 0x1234);
  }
}

TEST(X86ElfLoader, OtherXenNotesDoNotMakeItPvh) {
  GuestMemory memory = make_memory();
  const auto image = ElfImage()
                         .entry(kText)
                         .load(kText, pattern(0x100, 3))
                         .note("Xen", 6, {'l', 'i', 'n', 0})
                         .build();
  ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel(memory, image));
  EXPECT_EQ(kernel.protocol, BootProtocol::kLinux64);
}

TEST(X86ElfLoader, TruncatedElfHeaderIsRefused) {
  GuestMemory memory = make_memory();
  auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 1)).build();
  image.resize(20);
  EXPECT_THAT(
      load_error(memory, image),
      AllOf(HasSubstr("ELF vmlinux"), HasSubstr("20 bytes, fewer than the 64-byte ELF header")));
}

TEST(X86ElfLoader, ProgramHeaderTableBeyondTheFileIsRefused) {
  GuestMemory memory = make_memory();
  auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 1)).build();
  test::put<uint64_t>(image, offsetof(Elf64_Ehdr, e_phoff), image.size() - 10);
  EXPECT_THAT(load_error(memory, image), HasSubstr("program header table (1 entries at offset"));
  // An e_phoff so large that offset + size wraps.
  test::put<uint64_t>(image, offsetof(Elf64_Ehdr, e_phoff), UINT64_MAX - 8);
  EXPECT_THAT(load_error(memory, image), HasSubstr("lies beyond the end"));
}

TEST(X86ElfLoader, SegmentWhoseBytesAreNotInTheFileIsRefused) {
  GuestMemory memory = make_memory();
  auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 1), 0x10000).build();
  modify_phdr(image, 0, [](Elf64_Phdr& p) { p.p_filesz = 0x8000; });
  EXPECT_THAT(load_error(memory, image),
              AllOf(HasSubstr("segment 0"), HasSubstr("lie beyond the end of the")));
  modify_phdr(image, 0, [](Elf64_Phdr& p) {
    p.p_offset = UINT64_MAX - 4;
    p.p_filesz = 0x100;
  });
  EXPECT_THAT(load_error(memory, image), HasSubstr("lie beyond the end"));
}

TEST(X86ElfLoader, SegmentWithMoreFileBytesThanMemoryIsRefused) {
  GuestMemory memory = make_memory();
  auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 1)).build();
  modify_phdr(image, 0, [](Elf64_Phdr& p) { p.p_memsz = 0x80; });
  EXPECT_THAT(load_error(memory, image), HasSubstr("file size 0x100 exceeds memory size 0x80"));
}

TEST(X86ElfLoader, HugeOrWrappingSegmentSizesAreRefused) {
  GuestMemory memory = make_memory();
  auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 1)).build();
  modify_phdr(image, 0, [](Elf64_Phdr& p) { p.p_memsz = UINT64_MAX; });
  EXPECT_THAT(load_error(memory, image), HasSubstr("runs past the end of the address space"));
  modify_phdr(image, 0, [](Elf64_Phdr& p) { p.p_memsz = 1ULL << 40; });
  EXPECT_THAT(load_error(memory, image), HasSubstr("MMIO gap"));
  modify_phdr(image, 0, [](Elf64_Phdr& p) { p.p_memsz = 128 * kMiB; });
  EXPECT_THAT(load_error(memory, image), HasSubstr("does not fit in the guest's 64 MiB of RAM"));
}

TEST(X86ElfLoader, SegmentIntoTheMmioGapIsRefusedEvenWithRamAboveIt) {
  GuestMemory memory = make_memory(5 * kGiB);
  const auto image = ElfImage()
                         .entry(kMmioGapStart - 0x1000)
                         .load(kMmioGapStart - 0x1000, pattern(0x2000, 1))
                         .build();
  EXPECT_THAT(
      load_error(memory, image),
      AllOf(HasSubstr("segment 0"), HasSubstr("reaches the 32-bit MMIO gap at 0xc0000000")));
  const auto above = ElfImage().entry(kMmioGapEnd).load(kMmioGapEnd, pattern(0x100, 1)).build();
  EXPECT_THAT(load_error(memory, above), HasSubstr("MMIO gap"));
}

TEST(X86ElfLoader, SegmentOverTheBootDataIsRefused) {
  GuestMemory memory = make_memory();
  const auto image = ElfImage().entry(0x7000).load(0x7000, pattern(0x100, 1)).build();
  EXPECT_THAT(load_error(memory, image), HasSubstr("overlaps the boot data below 1 MiB"));
  const auto straddling = ElfImage().entry(kMiB).load(kMiB - 0x1000, pattern(0x2000, 1)).build();
  EXPECT_THAT(load_error(memory, straddling), HasSubstr("overlaps the boot data"));
}

TEST(X86ElfLoader, RefusedImageLeavesGuestMemoryUntouched) {
  GuestMemory memory = make_memory();
  const auto image = ElfImage()
                         .entry(kText)
                         .load(kText, pattern(0x1000, 1))
                         .load(kMmioGapStart, pattern(0x1000, 2))
                         .build();
  EXPECT_FALSE(load_kernel(memory, image).has_value());
  EXPECT_EQ(read_guest(memory, kText, 0x1000), std::vector<uint8_t>(0x1000, 0));
}

TEST(X86ElfLoader, EntryPointOutsideTheKernelIsRefused) {
  GuestMemory memory = make_memory();
  const auto image = ElfImage().entry(0xffffffff81000000).load(kText, pattern(0x100, 1)).build();
  EXPECT_THAT(load_error(memory, image), HasSubstr("entry point 0xffffffff81000000 is outside"));
  const auto pvh =
      ElfImage().entry(kText).load(kText, pattern(0x100, 1)).pvh_note(kText + 0x100).build();
  EXPECT_THAT(load_error(memory, pvh), HasSubstr("PVH entry point"));
}

TEST(X86ElfLoader, MalformedNotesAreRefused) {
  GuestMemory memory = make_memory();
  auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 1)).pvh_note(kText).build();
  // namesz claims more bytes than the note segment has.
  auto bad_name = image;
  modify_phdr(bad_name, 1,
              [&](Elf64_Phdr& p) { test::put<uint32_t>(bad_name, p.p_offset, 0x1000); });
  EXPECT_THAT(load_error(memory, bad_name), HasSubstr("runs past the end of the segment"));
  // descsz of 0xffffffff.
  auto bad_desc = image;
  modify_phdr(bad_desc, 1,
              [&](Elf64_Phdr& p) { test::put<uint32_t>(bad_desc, p.p_offset + 4, 0xffffffff); });
  EXPECT_THAT(load_error(memory, bad_desc), HasSubstr("runs past the end of the segment"));
  // A note segment beyond the file.
  auto bad_segment = image;
  modify_phdr(bad_segment, 1, [](Elf64_Phdr& p) { p.p_filesz = 1 << 20; });
  EXPECT_THAT(load_error(memory, bad_segment), HasSubstr("note segment 1"));
  // A PHYS32_ENTRY of the wrong size.
  const auto odd =
      ElfImage().entry(kText).load(kText, pattern(0x100, 1)).note("Xen", 18, {1, 2}).build();
  EXPECT_THAT(load_error(memory, odd), HasSubstr("2 bytes, not 4 or 8"));
}

TEST(X86ElfLoader, WrongKindsOfElfAreRefused) {
  GuestMemory memory = make_memory();
  const auto good = ElfImage().entry(kText).load(kText, pattern(0x100, 1)).build();
  auto elf32 = good;
  elf32[EI_CLASS] = ELFCLASS32;
  EXPECT_THAT(load_error(memory, elf32), HasSubstr("not a little-endian 64-bit x86-64 ELF"));
  auto arm = good;
  test::put<uint16_t>(arm, offsetof(Elf64_Ehdr, e_machine), EM_AARCH64);
  EXPECT_THAT(load_error(memory, arm), HasSubstr("x86-64"));
  auto shared = good;
  test::put<uint16_t>(shared, offsetof(Elf64_Ehdr, e_type), ET_DYN);
  EXPECT_THAT(load_error(memory, shared), HasSubstr("not an executable"));
  auto odd_phentsize = good;
  test::put<uint16_t>(odd_phentsize, offsetof(Elf64_Ehdr, e_phentsize), 32);
  EXPECT_THAT(load_error(memory, odd_phentsize), HasSubstr("program headers of 32 bytes"));
  const auto no_load = ElfImage().entry(kText).note("Linux", 1, {}).build();
  EXPECT_THAT(load_error(memory, no_load), HasSubstr("no loadable segments"));
}

TEST(X86KernelLoader, GarbageIsNeitherBzImageNorElf) {
  GuestMemory memory = make_memory();
  std::mt19937 random(42);
  std::vector<uint8_t> garbage(100000);
  for (auto& byte : garbage) {
    byte = static_cast<uint8_t>(random());
  }
  EXPECT_THAT(load_error(memory, garbage),
              HasSubstr("not a bzImage or ELF vmlinux: 100000 bytes with neither the ELF magic"));
  EXPECT_THAT(load_error(memory, {}), HasSubstr("not a bzImage or ELF vmlinux"));
}

TEST(X86KernelLoader, FileErrorsNameThePath) {
  GuestMemory memory = make_memory();
  const auto missing = load_kernel_file(memory, "/nonexistent/vmlinuz");
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message(),
              AllOf(HasSubstr("/nonexistent/vmlinuz"), HasSubstr("No such file")));

  const std::string path = ::testing::TempDir() + "x86_kernel_loader_garbage";
  std::ofstream(path) << "this is not a kernel";
  const auto garbage = load_kernel_file(memory, path);
  ASSERT_FALSE(garbage.has_value());
  EXPECT_THAT(garbage.error().message(), HasSubstr(path + ": not a bzImage or ELF vmlinux: "));
  std::remove(path.c_str());
}

TEST(X86KernelLoader, ElfFileLoadsThroughTheFileWrapper) {
  GuestMemory memory = make_memory();
  const std::string path = ::testing::TempDir() + "x86_kernel_loader_vmlinux";
  const auto image = ElfImage().entry(kText).load(kText, pattern(0x100, 9)).build();
  write_file(path, image);
  ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel_file(memory, path));
  EXPECT_EQ(kernel.entry, kText);
  EXPECT_EQ(read_guest(memory, kText, 0x100), pattern(0x100, 9));
  std::remove(path.c_str());
}

// A plan checks the file and places the kernel but writes nothing: the VMM plans before any
// KVM call and writes while KVM sets the VM up. The plan keeps the file mapped, so the
// write works after the file is gone from the directory, and can go to another memory.
TEST(X86KernelLoader, APlanWritesNothingUntilItsWriteRuns) {
  GuestMemory memory = make_memory();
  const std::string path = ::testing::TempDir() + "x86_kernel_loader_planned_vmlinux";
  const auto text = pattern(0x1800, 5);
  write_file(path, ElfImage().entry(kText).load(kText, text, 0x3000).build());
  ASSERT_OK_AND_ASSIGN(const PlannedKernel planned, plan_kernel_file(memory, path));
  std::remove(path.c_str());
  EXPECT_EQ(planned.kernel.entry, kText);
  EXPECT_EQ(planned.kernel.extent, (GuestRange{kText, 0x3000}));
  EXPECT_EQ(read_guest(memory, kText, text.size()), std::vector<uint8_t>(text.size(), 0));

  ASSERT_OK(memory.fill(kText + 0x2000, 0x1000, 0xee));  // bss, dirty
  ASSERT_OK(planned.write(memory));
  EXPECT_EQ(read_guest(memory, kText, text.size()), text);
  EXPECT_EQ(read_guest(memory, kText + 0x2000, 0x1000), std::vector<uint8_t>(0x1000, 0));
}

TEST(X86KernelLoader, ABzImagePlanWritesNothingUntilItsWriteRuns) {
  GuestMemory memory = make_memory();
  const auto image = test::make_bzimage({.setup_sects = 4});
  const size_t setup_bytes = 5 * 512;  // boot sector and 4 setup sectors
  const std::vector<uint8_t> payload_start(image.begin() + setup_bytes,
                                           image.begin() + setup_bytes + 64);
  ASSERT_OK_AND_ASSIGN(const PlannedKernel planned, plan_kernel(memory, image));
  EXPECT_EQ(read_guest(memory, kKernelLoadAddr, 64), std::vector<uint8_t>(64, 0));
  ASSERT_OK(planned.write(memory));
  EXPECT_EQ(read_guest(memory, kKernelLoadAddr, 64), payload_start);
}

// The lines of /proc/self/maps that name `path`.
std::vector<std::string> mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> found;
  for (std::string line; std::getline(maps, line);) {
    if (line.ends_with(" " + path)) {
      found.push_back(line);
    }
  }
  return found;
}

// By default the same segments are copied: nothing of the file stays mapped.
TEST(X86KernelLoader, ByDefaultPageAlignedSegmentsAreCopiedNotMapped) {
  GuestMemory memory = make_memory();
  const std::string path = ::testing::TempDir() + "x86_kernel_loader_copied_vmlinux";
  const auto text = pattern(0x2800, 4);
  write_file(path, ElfImage().page_aligned().entry(kText).load(kText, text, 0x4000).build());
  ASSERT_OK(load_kernel_file(memory, path));
  EXPECT_EQ(read_guest(memory, kText, text.size()), text);
  EXPECT_TRUE(mappings_of(path).empty()) << mappings_of(path)[0];
  std::remove(path.c_str());
}

TEST(X86KernelLoader, PageAlignedSegmentsAreMappedCopyOnWriteFromTheFile) {
  GuestMemory memory = make_memory();
  ASSERT_OK(memory.fill(kText, 0x8000, 0xee));  // dirty: the loader must leave no stale byte
  const std::string path = ::testing::TempDir() + "x86_kernel_loader_mapped_vmlinux";
  // Two whole pages plus a partial one, and a bss page after it.
  const auto text = pattern(0x2800, 4);
  const auto image = ElfImage().page_aligned().entry(kText).load(kText, text, 0x4000).build();
  write_file(path, image);
  ASSERT_OK(load_kernel_file(memory, path, KernelPages::kShared));

  EXPECT_EQ(read_guest(memory, kText, text.size()), text);
  EXPECT_EQ(read_guest(memory, kText + text.size(), 0x4000 - text.size()),
            std::vector<uint8_t>(0x4000 - text.size(), 0));
  // The two whole pages are a private mapping of the file, the rest is guest RAM.
  const uint8_t* host = memory.host_address(kText).value();
  const std::vector<std::string> maps = mappings_of(path);
  ASSERT_EQ(maps.size(), 1u) << "the segment's whole pages should be mapped from " << path;
  EXPECT_EQ(maps[0].substr(0, maps[0].find(' ')),
            fmt::format("{:x}-{:x}", reinterpret_cast<uintptr_t>(host),
                        reinterpret_cast<uintptr_t>(host) + 0x2000));
  EXPECT_NE(maps[0].find(" rw-p "), std::string::npos) << maps[0];

  // A guest write copies the page: the file keeps its bytes.
  ASSERT_OK(memory.fill(kText, 0x2000, 0x5a));
  std::ifstream file(path, std::ios::binary);
  std::vector<uint8_t> on_disk(image.size());
  file.read(reinterpret_cast<char*>(on_disk.data()), static_cast<std::streamsize>(on_disk.size()));
  EXPECT_EQ(on_disk, image);
  std::remove(path.c_str());
}

TEST(X86KernelLoader, SegmentsAtUnalignedFileOffsetsAreCopied) {
  GuestMemory memory = make_memory();
  const std::string path = ::testing::TempDir() + "x86_kernel_loader_unaligned_vmlinux";
  const auto text = pattern(0x3000, 6);
  const auto image = ElfImage().entry(kText).load(kText, text).build();  // offset 0x78
  write_file(path, image);
  ASSERT_OK(load_kernel_file(memory, path));
  EXPECT_EQ(read_guest(memory, kText, text.size()), text);
  EXPECT_TRUE(mappings_of(path).empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dsec::x86_64

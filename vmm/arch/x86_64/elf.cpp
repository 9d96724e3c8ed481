// Loader for an uncompressed ELF64 vmlinux.
#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "vmm/arch/x86_64/image_bytes.h"
#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

// Xen's public elfnote.h: the 32-bit physical entry point for PVH, in a note named "Xen".
constexpr uint32_t kXenElfnotePhys32Entry = 18;

std::unexpected<Error> elf_error(const std::string& what) {
  return fail("ELF vmlinux: " + what);
}

constexpr uint64_t align_up(uint64_t value, uint64_t align) {
  return (value + align - 1) & ~(align - 1);
}

// The PVH entry point from the notes in program header `index`, if they carry one.
Result<std::optional<uint64_t>> find_pvh_entry(std::span<const uint8_t> image,
                                               const Elf64_Phdr& phdr, size_t index) {
  if (!range_fits(phdr.p_offset, phdr.p_filesz, image.size())) {
    return elf_error(
        fmt::format("note segment {}: {:#x} bytes at offset {:#x} lie beyond the "
                    "end of the {}-byte file",
                    index, phdr.p_filesz, phdr.p_offset, image.size()));
  }
  const std::span<const uint8_t> notes = image.subspan(phdr.p_offset, phdr.p_filesz);
  // Linux emits 4-byte aligned notes even in ELF64; honour 8 where the segment asks for it.
  const uint64_t align = phdr.p_align == 8 ? 8 : 4;
  std::optional<uint64_t> entry;
  uint64_t pos = 0;
  while (pos < notes.size()) {
    const auto header = read_at<Elf64_Nhdr>(notes, pos);
    const uint64_t name_offset = pos + sizeof(Elf64_Nhdr);
    const uint64_t desc_offset = name_offset + align_up(header ? header->n_namesz : 0, align);
    if (!header || !range_fits(name_offset, header->n_namesz, notes.size()) ||
        !range_fits(desc_offset, header->n_descsz, notes.size())) {
      return elf_error(
          fmt::format("note segment {}: the note at offset {:#x} runs past the end "
                      "of the segment",
                      index, phdr.p_offset + pos));
    }
    const bool is_xen = header->n_namesz == 4 && std::memcmp(&notes[name_offset], "Xen", 4) == 0;
    if (is_xen && header->n_type == kXenElfnotePhys32Entry) {
      // Linux writes the entry with _ASM_PTR: 8 bytes on x86-64, 4 in older kernels. Both
      // reads are in range (checked above), so they yield the entry.
      if (header->n_descsz == 4) {
        entry = read_at<uint32_t>(notes, desc_offset);
      } else if (header->n_descsz == 8) {
        entry = read_at<uint64_t>(notes, desc_offset);
      } else {
        return elf_error(
            fmt::format("the Xen PHYS32_ENTRY note has {} bytes, not 4 or 8", header->n_descsz));
      }
    }
    pos = desc_offset + align_up(header->n_descsz, align);
  }
  return entry;
}

}  // namespace

Result<PlannedKernel> plan_elf_kernel(const GuestMemory& memory, std::span<const uint8_t> image,
                                      int image_fd) {
  const auto ehdr = read_at<Elf64_Ehdr>(image, 0);
  if (!ehdr) {
    return elf_error(fmt::format("the file has {} bytes, fewer than the {}-byte ELF header",
                                 image.size(), sizeof(Elf64_Ehdr)));
  }
  if (ehdr->e_ident[EI_CLASS] != ELFCLASS64 || ehdr->e_ident[EI_DATA] != ELFDATA2LSB ||
      ehdr->e_machine != EM_X86_64) {
    return elf_error("not a little-endian 64-bit x86-64 ELF file");
  }
  if (ehdr->e_type != ET_EXEC) {
    return elf_error(fmt::format("ELF type {} is not an executable (ET_EXEC)", ehdr->e_type));
  }
  if (ehdr->e_phnum == 0 || ehdr->e_phentsize != sizeof(Elf64_Phdr)) {
    return elf_error(fmt::format("{} program headers of {} bytes; expected at least one of {}",
                                 ehdr->e_phnum, ehdr->e_phentsize, sizeof(Elf64_Phdr)));
  }
  const uint64_t table_size = uint64_t{ehdr->e_phnum} * sizeof(Elf64_Phdr);
  if (!range_fits(ehdr->e_phoff, table_size, image.size())) {
    return elf_error(
        fmt::format("the program header table ({} entries at offset {:#x}) lies "
                    "beyond the end of the {}-byte file",
                    ehdr->e_phnum, ehdr->e_phoff, image.size()));
  }

  // Check every segment before writing any, so a bad file leaves guest memory untouched.
  std::vector<Elf64_Phdr> loads;
  std::optional<uint64_t> pvh_entry;
  for (size_t i = 0; i < ehdr->e_phnum; ++i) {
    const Elf64_Phdr phdr = *read_at<Elf64_Phdr>(image, ehdr->e_phoff + i * sizeof(Elf64_Phdr));
    if (phdr.p_type == PT_NOTE) {
      if (auto entry = DSEC_TRY(find_pvh_entry(image, phdr, i))) {
        pvh_entry = entry;
      }
      continue;
    }
    if (phdr.p_type != PT_LOAD || phdr.p_memsz == 0) {
      continue;
    }
    if (phdr.p_filesz > phdr.p_memsz) {
      return elf_error(fmt::format("segment {}: file size {:#x} exceeds memory size {:#x}", i,
                                   phdr.p_filesz, phdr.p_memsz));
    }
    if (!range_fits(phdr.p_offset, phdr.p_filesz, image.size())) {
      return elf_error(
          fmt::format("segment {}: {:#x} bytes at offset {:#x} lie beyond the end "
                      "of the {}-byte file",
                      i, phdr.p_filesz, phdr.p_offset, image.size()));
    }
    auto placed =
        check_kernel_range(memory, phdr.p_paddr, phdr.p_memsz, fmt::format("segment {}", i));
    if (!placed) {
      return std::unexpected(placed.error().with_context("ELF vmlinux"));
    }
    loads.push_back(phdr);
  }
  if (loads.empty()) {
    return elf_error("no loadable segments");
  }

  LoadedKernel kernel;
  uint64_t lowest = UINT64_MAX;
  uint64_t highest = 0;
  for (const Elf64_Phdr& phdr : loads) {
    lowest = std::min(lowest, phdr.p_paddr);
    highest = std::max(highest, phdr.p_paddr + phdr.p_memsz);
  }
  kernel.extent = {lowest, highest - lowest};
  kernel.initrd_addr_max = kMmioGapStart - 1;
  kernel.cmdline_max = kCmdlineMaxSize - 1;
  if (pvh_entry) {
    kernel.protocol = BootProtocol::kPvh;
    kernel.entry = *pvh_entry;
  } else {
    kernel.protocol = BootProtocol::kLinux64;
    kernel.entry = ehdr->e_entry;
  }
  // The 64-bit entry runs on the boot page tables, so it must be identity-mapped.
  const uint64_t entry_limit =
      kernel.protocol == BootProtocol::kPvh ? highest : std::min(highest, kIdentityMapSize);
  if (kernel.entry < lowest || kernel.entry >= entry_limit) {
    return elf_error(fmt::format("{} entry point {:#x} is outside the loaded kernel [{:#x}, {:#x})",
                                 pvh_entry ? "PVH" : "the", kernel.entry, lowest, entry_limit));
  }

  auto write = [image, image_fd, loads = std::move(loads)](GuestMemory& target) -> Status {
    for (const Elf64_Phdr& phdr : loads) {
      // The whole pages of a page-aligned segment are mapped from the file; the rest (a
      // partial last page, an unaligned segment, no file) is copied.
      uint64_t mapped = 0;
      if (image_fd >= 0 && phdr.p_offset % kPageSize == 0 && phdr.p_paddr % kPageSize == 0) {
        mapped = phdr.p_filesz & ~(kPageSize - 1);
      }
      if (mapped != 0) {
        DSEC_TRY(target.map_file_pages(phdr.p_paddr, mapped, image_fd, phdr.p_offset));
      }
      DSEC_TRY(target.write(phdr.p_paddr + mapped,
                            image.subspan(phdr.p_offset + mapped, phdr.p_filesz - mapped)));
      DSEC_TRY(target.fill(phdr.p_paddr + phdr.p_filesz, phdr.p_memsz - phdr.p_filesz, 0));
    }
    return ok();
  };
  return PlannedKernel{kernel, std::move(write)};
}

}  // namespace dsec::x86_64

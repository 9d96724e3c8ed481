// Crafted kernel images for loader tests: a minimal ELF64 vmlinux and a minimal bzImage,
// each with every field a test may want to corrupt reachable.
#pragma once

#include <asm/bootparam.h>
#include <elf.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64::test {

template <typename T>
void put(std::vector<uint8_t>& bytes, uint64_t offset, const T& value) {
  if (bytes.size() < offset + sizeof(T)) {
    bytes.resize(offset + sizeof(T));
  }
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

template <typename T>
T get(const std::vector<uint8_t>& bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Bytes that differ from their neighbours, so a misplaced copy shows.
inline std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  }
  return bytes;
}

// An ELF64 x86-64 executable: the header at 0, program headers at 64, then the segments'
// bytes in order.
class ElfImage {
 public:
  ElfImage& entry(uint64_t address) {
    entry_ = address;
    return *this;
  }
  ElfImage& load(uint64_t paddr, std::vector<uint8_t> bytes, uint64_t memsz = 0) {
    const uint64_t filesz = bytes.size();
    segments_.push_back({PT_LOAD, paddr, std::move(bytes), memsz == 0 ? filesz : memsz, 0x1000});
    return *this;
  }
  // One note segment holding one note.
  ElfImage& note(const std::string& name, uint32_t type, const std::vector<uint8_t>& desc) {
    std::vector<uint8_t> bytes;
    put(bytes, 0,
        Elf64_Nhdr{static_cast<Elf64_Word>(name.size() + 1), static_cast<Elf64_Word>(desc.size()),
                   type});
    bytes.insert(bytes.end(), name.begin(), name.end());
    bytes.push_back(0);
    bytes.resize((bytes.size() + 3) & ~size_t{3});
    bytes.insert(bytes.end(), desc.begin(), desc.end());
    bytes.resize((bytes.size() + 3) & ~size_t{3});
    segments_.push_back({PT_NOTE, 0, bytes, 0, 4});
    return *this;
  }
  // The PVH entry note as Linux writes it (8 bytes) or as older kernels did (4 bytes).
  ElfImage& pvh_note(uint64_t entry, size_t size = 8) {
    std::vector<uint8_t> desc(size);
    std::memcpy(desc.data(), &entry, size);
    return note("Xen", 18, desc);
  }

  // Puts every segment's bytes at a 4 KiB-aligned file offset, as a real vmlinux has them.
  ElfImage& page_aligned() {
    page_aligned_ = true;
    return *this;
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> bytes;
    Elf64_Ehdr ehdr{};
    std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
    ehdr.e_ident[EI_CLASS] = ELFCLASS64;
    ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
    ehdr.e_ident[EI_VERSION] = EV_CURRENT;
    ehdr.e_type = ET_EXEC;
    ehdr.e_machine = EM_X86_64;
    ehdr.e_version = EV_CURRENT;
    ehdr.e_entry = entry_;
    ehdr.e_phoff = sizeof(Elf64_Ehdr);
    ehdr.e_ehsize = sizeof(Elf64_Ehdr);
    ehdr.e_phentsize = sizeof(Elf64_Phdr);
    ehdr.e_phnum = static_cast<Elf64_Half>(segments_.size());
    put(bytes, 0, ehdr);
    uint64_t data_offset = sizeof(Elf64_Ehdr) + segments_.size() * sizeof(Elf64_Phdr);
    for (size_t i = 0; i < segments_.size(); ++i) {
      const Segment& s = segments_[i];
      if (page_aligned_) {
        data_offset = (data_offset + 0xfff) & ~uint64_t{0xfff};
      }
      Elf64_Phdr phdr{};
      phdr.p_type = s.type;
      phdr.p_offset = data_offset;
      phdr.p_vaddr = s.paddr;
      phdr.p_paddr = s.paddr;
      phdr.p_filesz = s.bytes.size();
      phdr.p_memsz = s.type == PT_LOAD ? s.memsz : 0;
      phdr.p_align = s.align;
      put(bytes, sizeof(Elf64_Ehdr) + i * sizeof(Elf64_Phdr), phdr);
      bytes.resize(data_offset);
      bytes.insert(bytes.end(), s.bytes.begin(), s.bytes.end());
      data_offset += s.bytes.size();
    }
    return bytes;
  }

 private:
  struct Segment {
    uint32_t type;
    uint64_t paddr;
    std::vector<uint8_t> bytes;
    uint64_t memsz;
    uint64_t align;
  };
  uint64_t entry_ = 0;
  bool page_aligned_ = false;
  std::vector<Segment> segments_;
};

inline constexpr uint64_t phdr_offset(size_t index) {
  return sizeof(Elf64_Ehdr) + index * sizeof(Elf64_Phdr);
}

// Rewrites program header `index` of a built ELF image.
template <typename F>
void modify_phdr(std::vector<uint8_t>& image, size_t index, F change) {
  auto phdr = get<Elf64_Phdr>(image, phdr_offset(index));
  change(phdr);
  put(image, phdr_offset(index), phdr);
}

struct BzImageOptions {
  uint8_t setup_sects = 4;
  uint16_t version = 0x020f;
  uint16_t xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
  uint8_t loadflags = LOADED_HIGH;
  uint32_t init_size = 0;  // 0: the payload's size
  uint32_t cmdline_size = 2047;
  uint32_t initrd_addr_max = 0x7fffffff;
  size_t payload_size = 64 * 1024;
};

// A bzImage: boot sector and setup code of (setup_sects + 1) * 512 bytes with the setup
// header at 0x1f1, then the protected-mode payload (a pattern).
inline std::vector<uint8_t> make_bzimage(const BzImageOptions& options = {}) {
  const size_t setup_sects = options.setup_sects == 0 ? 4 : options.setup_sects;
  std::vector<uint8_t> bytes((setup_sects + 1) * 512, 0);
  setup_header header{};
  header.setup_sects = options.setup_sects;
  header.boot_flag = 0xaa55;
  header.jump = 0x6aeb;  // jmp over the header, which ends at 0x202 + 0x6a = 0x26c
  header.header = 0x53726448;
  header.version = options.version;
  header.loadflags = options.loadflags;
  header.code32_start = 0x100000;
  header.initrd_addr_max = options.initrd_addr_max;
  header.kernel_alignment = 0x200000;
  header.relocatable_kernel = 1;
  header.min_alignment = 21;
  header.xloadflags = options.xloadflags;
  header.cmdline_size = options.cmdline_size;
  header.pref_address = 0x1000000;
  header.init_size =
      options.init_size != 0 ? options.init_size : static_cast<uint32_t>(options.payload_size);
  header.syssize = static_cast<uint32_t>((options.payload_size + 15) / 16);
  put(bytes, 0x1f1, header);
  const std::vector<uint8_t> payload = pattern(options.payload_size, 0x5a);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

// Writes `bytes` to `path`, replacing it: a kernel or initrd for the file loaders.
inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// `size` bytes of guest memory at `gpa` (empty where the range is not in guest RAM).
inline std::vector<uint8_t> read_guest(const GuestMemory& memory, uint64_t gpa, size_t size) {
  std::vector<uint8_t> bytes(size);
  if (!memory.read(gpa, bytes).has_value()) {
    return {};
  }
  return bytes;
}

}  // namespace dsec::x86_64::test

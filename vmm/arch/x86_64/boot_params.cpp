#include "vmm/arch/x86_64/boot_params.h"

#include <fmt/format.h>

#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

constexpr uint16_t kBootFlag = 0xaa55;
constexpr uint32_t kHdrSMagic = 0x53726448;  // "HdrS"
// "Undefined" boot loader ID: we have none assigned.
constexpr uint8_t kLoaderTypeUndefined = 0xff;
// End of the real-mode heap, relative to the setup code, as other loaders set it. The
// 64-bit entry skips the real-mode setup code that would use it.
constexpr uint16_t kHeapEndPtr = 0xfe00;
// What an ELF vmlinux gets in place of a setup header: 2.12, the version whose fields
// this loader fills, and the 16 MiB alignment x86-64 kernels are built for.
constexpr uint16_t kElfBootProtocol = 0x020c;
constexpr uint32_t kElfKernelAlignment = 0x1000000;

}  // namespace

Result<boot_params> make_boot_params(const LoadedKernel& kernel, uint64_t cmdline_addr,
                                     std::optional<GuestRange> initrd,
                                     std::span<const boot_e820_entry> e820) {
  if (e820.size() > E820_MAX_ENTRIES_ZEROPAGE) {
    return fail(fmt::format("the memory map has {} entries; the zero page holds {}", e820.size(),
                            E820_MAX_ENTRIES_ZEROPAGE));
  }
  boot_params params{};
  if (kernel.setup) {
    params.hdr = *kernel.setup;
  } else {
    params.hdr.boot_flag = kBootFlag;
    params.hdr.header = kHdrSMagic;
    params.hdr.version = kElfBootProtocol;
    params.hdr.kernel_alignment = kElfKernelAlignment;
    params.hdr.cmdline_size = static_cast<uint32_t>(kernel.cmdline_max);
    params.hdr.initrd_addr_max = static_cast<uint32_t>(kernel.initrd_addr_max);
  }
  params.hdr.type_of_loader = kLoaderTypeUndefined;
  params.hdr.loadflags |= LOADED_HIGH | CAN_USE_HEAP;
  params.hdr.heap_end_ptr = kHeapEndPtr;
  params.hdr.cmd_line_ptr = static_cast<uint32_t>(cmdline_addr);
  params.ext_cmd_line_ptr = static_cast<uint32_t>(cmdline_addr >> 32);
  if (initrd) {
    params.hdr.ramdisk_image = static_cast<uint32_t>(initrd->base);
    params.ext_ramdisk_image = static_cast<uint32_t>(initrd->base >> 32);
    params.hdr.ramdisk_size = static_cast<uint32_t>(initrd->size);
    params.ext_ramdisk_size = static_cast<uint32_t>(initrd->size >> 32);
  }
  for (size_t i = 0; i < e820.size(); ++i) {
    params.e820_table[i] = e820[i];
  }
  params.e820_entries = static_cast<uint8_t>(e820.size());
  return params;
}

}  // namespace dsec::x86_64

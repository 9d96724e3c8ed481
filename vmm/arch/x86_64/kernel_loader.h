// Loading a Linux kernel into guest memory: an uncompressed ELF64 vmlinux (entered through
// PVH if it carries the Xen PHYS32_ENTRY note, else through the 64-bit Linux boot
// protocol) or a bzImage (64-bit Linux boot protocol, version 2.12 or newer).
//
// Every byte of the image is untrusted: a truncated or crafted file yields an Error that
// names the problem, never a crash and never a write outside guest RAM or into the boot
// data below 1 MiB.
#pragma once

#include <asm/bootparam.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "vmm/common/error.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::x86_64 {

enum class BootProtocol : uint8_t {
  kLinux64,  // 64-bit mode, paging on, RSI = zero page
  kPvh,      // 32-bit protected mode, paging off, EBX = hvm_start_info
};

struct LoadedKernel {
  BootProtocol protocol = BootProtocol::kLinux64;
  uint64_t entry = 0;  // guest-physical entry point
  // Guest memory the kernel occupies or claims: loaded segments, bss, and for a bzImage
  // the init_size it needs to decompress in place. The initrd must stay clear of it.
  GuestRange extent;
  // The bzImage's setup header (only its declared length; the rest zero), which the
  // zero page carries; empty for an ELF vmlinux.
  std::optional<setup_header> setup;
  // Highest address the initrd may occupy (inclusive).
  uint64_t initrd_addr_max = 0;
  // Longest command line the kernel takes, NUL excluded.
  uint64_t cmdline_max = 0;
};

// A kernel checked against guest memory but not written into it yet. Every mistake in
// the file shows when it is planned; write() then fails only on a host error (a read or
// a mapping that fails). The VMM plans before any KVM call and writes while KVM sets the
// VM up. write() reads the image the plan came from, which must outlive it.
struct PlannedKernel {
  LoadedKernel kernel;
  std::function<Status(GuestMemory&)> write;
};

// Detects the format and plans its loading; load_kernel() below plans and writes.
Result<PlannedKernel> plan_kernel(const GuestMemory& memory, std::span<const uint8_t> image,
                                  int image_fd = -1);

// Detects the format and loads it. `image_fd`, if given, is an open file holding `image`:
// an ELF vmlinux's page-aligned segments are then mapped copy-on-write from it instead of
// copied (GuestMemory::map_file_pages), so VMs booting the same vmlinux share its pages.
Result<LoadedKernel> load_kernel(GuestMemory& memory, std::span<const uint8_t> image,
                                 int image_fd = -1);
// How a vmlinux's page-aligned segments reach guest memory.
enum class KernelPages {
  // Copied into the guest's own memory: the faster boot. The guest's first touch of each
  // page costs one fault, or one per 2 MiB where guest RAM is on huge pages.
  kCopied,
  // Mapped copy-on-write from the file (GuestMemory::map_file_pages): every VM booting
  // the same vmlinux shares its pages from the page cache, less memory per VM, but each
  // page the guest writes costs a copy-on-write fault (freeing init memory writes over
  // 4 MiB of it), and those pages are never on huge pages.
  kShared,
};

// Maps the file and plans its loading; the plan keeps the file mapped. Errors start with
// the path. A bzImage is always copied.
Result<PlannedKernel> plan_kernel_file(const GuestMemory& memory, const std::string& path,
                                       KernelPages pages = KernelPages::kCopied);
// Plans and writes.
Result<LoadedKernel> load_kernel_file(GuestMemory& memory, const std::string& path,
                                      KernelPages pages = KernelPages::kCopied);

Result<PlannedKernel> plan_elf_kernel(const GuestMemory& memory, std::span<const uint8_t> image,
                                      int image_fd = -1);
Result<PlannedKernel> plan_bzimage(const GuestMemory& memory, std::span<const uint8_t> image);

// Checks that kernel memory [base, base + size) is inside guest RAM, at or above 1 MiB
// (clear of the boot data) and below the MMIO gap. `what` names it in the error.
Status check_kernel_range(const GuestMemory& memory, uint64_t base, uint64_t size,
                          const std::string& what);

}  // namespace dsec::x86_64

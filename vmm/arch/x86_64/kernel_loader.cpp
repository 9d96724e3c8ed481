#include "vmm/arch/x86_64/kernel_loader.h"

#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/common/file.h"

namespace dsec::x86_64 {

namespace {

// Far above any real kernel; keeps a wrong path (a disk image, say) from being read whole.
constexpr uint64_t kMaxKernelFileSize = 512 * kMiB;
// Offset of setup_header.header ("HdrS") in a bzImage.
constexpr uint64_t kHdrSOffset = 0x202;

bool has_elf_magic(std::span<const uint8_t> image) {
  return image.size() >= SELFMAG && std::memcmp(image.data(), ELFMAG, SELFMAG) == 0;
}

bool has_hdrs_magic(std::span<const uint8_t> image) {
  return image.size() >= kHdrSOffset + 4 && std::memcmp(image.data() + kHdrSOffset, "HdrS", 4) == 0;
}

}  // namespace

Result<PlannedKernel> plan_kernel(const GuestMemory& memory, std::span<const uint8_t> image,
                                  int image_fd) {
  if (has_elf_magic(image)) {
    return plan_elf_kernel(memory, image, image_fd);
  }
  if (has_hdrs_magic(image)) {
    return plan_bzimage(memory, image);
  }
  return fail(fmt::format("not a bzImage or ELF vmlinux: {} bytes with neither the ELF magic "
                          "at offset 0 nor \"HdrS\" at offset {:#x}",
                          image.size(), kHdrSOffset),
              "give an x86-64 bzImage (arch/x86/boot/bzImage) or an uncompressed vmlinux");
}

Result<LoadedKernel> load_kernel(GuestMemory& memory, std::span<const uint8_t> image,
                                 int image_fd) {
  PlannedKernel planned = DSEC_TRY(plan_kernel(memory, image, image_fd));
  DSEC_TRY(planned.write(memory));
  return planned.kernel;
}

Result<PlannedKernel> plan_kernel_file(const GuestMemory& memory, const std::string& path,
                                       KernelPages pages) {
  auto image = map_file(path, kMaxKernelFileSize);
  if (!image) {
    return std::unexpected(image.error().with_context("kernel"));
  }
  auto file = std::make_shared<const MappedFile>(std::move(*image));
  auto planned =
      plan_kernel(memory, file->bytes(), pages == KernelPages::kShared ? file->fd() : -1);
  if (!planned) {
    return std::unexpected(planned.error().with_context(path));
  }
  // The write reads the mapping: it holds the file until the plan is gone.
  planned->write = [file, path, write = std::move(planned->write)](GuestMemory& target) -> Status {
    if (auto written = write(target); !written) {
      return std::unexpected(written.error().with_context(path));
    }
    return ok();
  };
  return planned;
}

Result<LoadedKernel> load_kernel_file(GuestMemory& memory, const std::string& path,
                                      KernelPages pages) {
  PlannedKernel planned = DSEC_TRY(plan_kernel_file(memory, path, pages));
  DSEC_TRY(planned.write(memory));
  return planned.kernel;
}

Status check_kernel_range(const GuestMemory& memory, uint64_t base, uint64_t size,
                          const std::string& what) {
  if (size > UINT64_MAX - base) {
    return fail(fmt::format("{} of {:#x} bytes at {:#x} runs past the end of the address space",
                            what, size, base));
  }
  const uint64_t end = base + size;
  if (base < kKernelLoadAddr) {
    return fail(
        fmt::format("{} at [{:#x}, {:#x}) overlaps the boot data below 1 MiB", what, base, end));
  }
  if (end > kMmioGapStart) {
    return fail(fmt::format("{} at [{:#x}, {:#x}) reaches the 32-bit MMIO gap at {:#x}", what, base,
                            end, kMmioGapStart));
  }
  if (!memory.contains(base, size)) {
    return fail(fmt::format("{} at [{:#x}, {:#x}) does not fit in the guest's {} MiB of RAM", what,
                            base, end, memory.total_size() >> 20),
                "give the VM more memory");
  }
  return ok();
}

}  // namespace dsec::x86_64

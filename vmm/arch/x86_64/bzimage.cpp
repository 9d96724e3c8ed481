// Loader for a bzImage, entered through the 64-bit Linux boot protocol
// (Documentation/arch/x86/boot.rst).
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "vmm/arch/x86_64/image_bytes.h"
#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {

namespace {

constexpr uint64_t kSetupHeaderOffset = 0x1f1;
constexpr uint32_t kHdrSMagic = 0x53726448;  // "HdrS"
constexpr uint16_t kBootFlag = 0xaa55;
// 2.12 added xloadflags, which says whether there is a 64-bit entry point at all.
constexpr uint16_t kMinBootProtocol = 0x020c;
// The 64-bit entry point is 0x200 bytes into the protected-mode code.
constexpr uint64_t kEntry64Offset = 0x200;

std::unexpected<Error> bzimage_error(const std::string& what, std::string hint = {}) {
  return fail("bzImage: " + what, std::move(hint));
}

// The setup header as the zero page should hold it: the spec has the loader copy only up
// to the end the kernel declares (0x202 + the byte at 0x201), later fields being zero.
setup_header declared_header(std::span<const uint8_t> image, const setup_header& full) {
  const uint64_t declared_end = 0x202 + uint64_t{image[0x201]};
  const uint64_t length = std::min<uint64_t>(declared_end - kSetupHeaderOffset, sizeof(full));
  setup_header header{};
  std::memcpy(&header, &full, length);
  return header;
}

}  // namespace

Result<PlannedKernel> plan_bzimage(const GuestMemory& memory, std::span<const uint8_t> image) {
  const auto header = read_at<setup_header>(image, kSetupHeaderOffset);
  if (!header) {
    return bzimage_error(
        fmt::format("the file has {} bytes, too few for a setup header", image.size()));
  }
  if (header->header != kHdrSMagic) {
    return bzimage_error("no \"HdrS\" magic at offset 0x202");
  }
  if (header->boot_flag != kBootFlag) {
    return bzimage_error(fmt::format("boot_flag is {:#06x}, not 0xaa55", header->boot_flag));
  }
  if (header->version < kMinBootProtocol) {
    return bzimage_error(
        fmt::format("boot protocol {}.{:02} is older than 2.12, the oldest that "
                    "dsec-vmm boots",
                    header->version >> 8, header->version & 0xff));
  }
  if ((header->xloadflags & XLF_KERNEL_64) == 0) {
    return bzimage_error("the kernel has no 64-bit entry point (XLF_KERNEL_64 is not set)",
                         "build the kernel for x86-64");
  }
  if ((header->loadflags & LOADED_HIGH) == 0) {
    return bzimage_error("the kernel does not load at 1 MiB (LOADED_HIGH is not set)");
  }
  // A setup_sects of 0 means 4, for the oldest kernels' sake.
  const uint64_t setup_sects = header->setup_sects == 0 ? 4 : header->setup_sects;
  const uint64_t setup_bytes = (setup_sects + 1) * 512;
  if (setup_bytes >= image.size()) {
    return bzimage_error(
        fmt::format("setup code of {} sectors ({} bytes) leaves nothing of the "
                    "{}-byte file for the kernel",
                    setup_sects, setup_bytes, image.size()));
  }
  const std::span<const uint8_t> payload = image.subspan(setup_bytes);
  // syssize is the protected-mode code's length in 16-byte units (32 bits since protocol
  // 2.04). A shorter file was cut short: its kernel would fail to decompress and crash or
  // halt the guest, so refuse it here, where the message can say why.
  const uint64_t declared_payload = uint64_t{header->syssize} * 16;
  if (payload.size() < declared_payload) {
    return bzimage_error(
        fmt::format("the file is truncated: its header declares {} bytes of kernel after the "
                    "{} bytes of setup code, but only {} follow",
                    declared_payload, setup_bytes, payload.size()),
        "copy or build the kernel again");
  }
  // The kernel decompresses in place and needs init_size bytes from its load address.
  const uint64_t claim = std::max<uint64_t>(payload.size(), header->init_size);
  auto placed = check_kernel_range(memory, kKernelLoadAddr, claim,
                                   fmt::format("the kernel ({} MiB with init_size)", claim >> 20));
  if (!placed) {
    return std::unexpected(placed.error().with_context("bzImage"));
  }

  LoadedKernel kernel;
  kernel.protocol = BootProtocol::kLinux64;
  kernel.entry = kKernelLoadAddr + kEntry64Offset;
  kernel.extent = {kKernelLoadAddr, claim};
  kernel.setup = declared_header(image, *header);
  kernel.initrd_addr_max = header->initrd_addr_max;
  kernel.cmdline_max = std::min<uint64_t>(header->cmdline_size, kCmdlineMaxSize - 1);
  return PlannedKernel{
      kernel, [payload](GuestMemory& target) { return target.write(kKernelLoadAddr, payload); }};
}

}  // namespace dsec::x86_64

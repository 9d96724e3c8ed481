#include "vmm/arch/x86_64/boot.h"

#include <fmt/format.h>

#include "vmm/arch/x86_64/boot_params.h"
#include "vmm/arch/x86_64/e820.h"
#include "vmm/arch/x86_64/gdt.h"
#include "vmm/arch/x86_64/layout.h"
#include "vmm/arch/x86_64/mptable.h"
#include "vmm/arch/x86_64/page_tables.h"
#include "vmm/arch/x86_64/pvh.h"

namespace dsec::x86_64 {

namespace {

Status write_cmdline(GuestMemory& memory, std::string_view cmdline) {
  const std::span<uint8_t> target = DSEC_TRY(memory.span(kCmdlineAddr, cmdline.size() + 1));
  std::copy(cmdline.begin(), cmdline.end(), target.begin());
  target.back() = 0;
  return ok();
}

}  // namespace

Status check_boot_data(const LoadedKernel& kernel, const BootData& data) {
  if (data.cmdline.size() > kernel.cmdline_max) {
    return fail(fmt::format("the kernel command line is {} bytes; the limit is {} bytes",
                            data.cmdline.size(), kernel.cmdline_max));
  }
  if (data.cmdline.find('\0') != std::string_view::npos) {
    return fail("the kernel command line contains a NUL byte");
  }
  return ok();
}

Status write_boot_data(GuestMemory& memory, const LoadedKernel& kernel, const BootData& data) {
  DSEC_TRY(check_boot_data(kernel, data));
  DSEC_TRY(write_cmdline(memory, data.cmdline));
  const std::vector<boot_e820_entry> e820 = e820_map(memory);
  if (kernel.protocol == BootProtocol::kPvh) {
    DSEC_TRY(write_pvh_start_info(memory, kCmdlineAddr, data.initrd, e820));
  } else {
    const boot_params params = DSEC_TRY(make_boot_params(kernel, kCmdlineAddr, data.initrd, e820));
    DSEC_TRY(memory.write_obj(kZeroPageAddr, params));
    DSEC_TRY(write_identity_page_tables(memory));
  }
  DSEC_TRY(write_gdt_and_idt(memory, boot_gdt(kernel.protocol)));
  return write_mptable(memory, data.vcpu_count);
}

}  // namespace dsec::x86_64

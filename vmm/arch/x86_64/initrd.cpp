#include "vmm/arch/x86_64/initrd.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/common/file.h"

namespace dsec::x86_64 {

namespace {
uint64_t mib_rounded_up(uint64_t bytes) {
  return (bytes + kMiB - 1) / kMiB;
}
}  // namespace

Result<GuestRange> place_initrd(const GuestMemory& memory, const LoadedKernel& kernel,
                                uint64_t size) {
  if (size == 0) {
    return fail("the initrd is empty");
  }
  const uint64_t limit =
      std::min(low_ram_end(memory),
               kernel.initrd_addr_max == UINT64_MAX ? UINT64_MAX : kernel.initrd_addr_max + 1);
  const uint64_t floor = kernel.extent.end();
  if (size > limit || ((limit - size) & ~(kPageSize - 1)) < floor) {
    return fail(fmt::format("initrd of {} MiB does not fit in {} MiB of guest memory",
                            mib_rounded_up(size), memory.total_size() >> 20),
                fmt::format("the initrd must fit between the kernel's end at {:#x} and {:#x}; "
                            "give the VM more memory or use a smaller initrd",
                            floor, limit));
  }
  return GuestRange{(limit - size) & ~(kPageSize - 1), size};
}

Result<GuestRange> load_initrd(GuestMemory& memory, const LoadedKernel& kernel,
                               std::span<const uint8_t> bytes) {
  const GuestRange range = DSEC_TRY(place_initrd(memory, kernel, bytes.size()));
  DSEC_TRY(memory.write(range.base, bytes));
  return range;
}

Result<PlannedInitrd> plan_initrd_file(const GuestMemory& memory, const LoadedKernel& kernel,
                                       const std::string& path) {
  // Errors from opening and reading name the path already.
  auto file = std::make_shared<const OpenFile>(DSEC_TRY(open_regular_file(path)));
  auto range = place_initrd(memory, kernel, file->size);
  if (!range) {
    return std::unexpected(range.error().with_context(path));
  }
  return PlannedInitrd{*range, [file, path, range = *range](GuestMemory& target) -> Status {
                         const std::span<uint8_t> bytes =
                             DSEC_TRY(target.span(range.base, range.size));
                         return read_exact(file->fd.get(), 0, bytes, path);
                       }};
}

Result<GuestRange> load_initrd_file(GuestMemory& memory, const LoadedKernel& kernel,
                                    const std::string& path) {
  PlannedInitrd planned = DSEC_TRY(plan_initrd_file(memory, kernel, path));
  DSEC_TRY(planned.write(memory));
  return planned.range;
}

}  // namespace dsec::x86_64

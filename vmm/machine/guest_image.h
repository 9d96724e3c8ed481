// What a VM boots: its kernel, initrd and boot data (command line, zero page or
// hvm_start_info, GDT, page tables, MP table), planned against guest memory first and
// written into it later. Planning makes every check of the user's files and choices, so
// that their mistakes show before any KVM call; the writing then runs on its own thread
// while KVM sets the VM up (Machine::create).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vmm/arch/x86_64/boot.h"
#include "vmm/arch/x86_64/initrd.h"
#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/common/error.h"
#include "vmm/machine/machine_config.h"
#include "vmm/memory/guest_memory.h"

namespace dsec::machine {

class GuestImagePlan {
 public:
  // Maps the kernel, opens the initrd, places both in `memory` and checks the command line
  // against the kernel. Errors name the file at fault and what to do.
  static Result<GuestImagePlan> create(const MachineConfig& config, const GuestMemory& memory);

  const x86_64::LoadedKernel& kernel() const { return kernel_.kernel; }
  // Writes the kernel, the initrd and the boot data; fails only on a host error (a file
  // that changed since the plan, a mapping that failed). Reads the plan only, so another
  // thread may use the plan's kernel() meanwhile.
  Status write(GuestMemory& memory) const;

 private:
  GuestImagePlan(x86_64::PlannedKernel kernel, std::optional<x86_64::PlannedInitrd> initrd,
                 std::string cmdline, uint32_t vcpus)
      : kernel_(std::move(kernel)),
        initrd_(std::move(initrd)),
        cmdline_(std::move(cmdline)),
        vcpus_(vcpus) {}
  x86_64::BootData boot_data() const;

  x86_64::PlannedKernel kernel_;
  std::optional<x86_64::PlannedInitrd> initrd_;
  std::string cmdline_;
  uint32_t vcpus_;
};

}  // namespace dsec::machine

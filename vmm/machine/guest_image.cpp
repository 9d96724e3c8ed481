#include "vmm/machine/guest_image.h"

namespace dsec::machine {

Result<GuestImagePlan> GuestImagePlan::create(const MachineConfig& config,
                                              const GuestMemory& memory) {
  auto kernel = DSEC_TRY(x86_64::plan_kernel_file(
      memory, config.kernel_path,
      config.share_kernel_pages ? x86_64::KernelPages::kShared : x86_64::KernelPages::kCopied));
  std::optional<x86_64::PlannedInitrd> initrd;
  if (!config.initrd_path.empty()) {
    initrd = DSEC_TRY(x86_64::plan_initrd_file(memory, kernel.kernel, config.initrd_path));
  }
  GuestImagePlan plan(std::move(kernel), std::move(initrd), guest_cmdline(config), config.vcpus);
  DSEC_TRY(x86_64::check_boot_data(plan.kernel(), plan.boot_data()));
  return plan;
}

x86_64::BootData GuestImagePlan::boot_data() const {
  return {.cmdline = cmdline_,
          .initrd = initrd_ ? std::optional(initrd_->range) : std::nullopt,
          .vcpu_count = vcpus_};
}

Status GuestImagePlan::write(GuestMemory& memory) const {
  DSEC_TRY(kernel_.write(memory));
  if (initrd_) {
    DSEC_TRY(initrd_->write(memory));
  }
  return x86_64::write_boot_data(memory, kernel(), boot_data());
}

}  // namespace dsec::machine

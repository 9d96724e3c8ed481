#include "vmm/machine/machine_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/machine/config_parts.h"
#include "vmm/machine/guest_profiler.h"
#include "vmm/machine/virtio_devices.h"

namespace dsec::machine {
namespace {

// The profile is written when the VM ends: check now that it can be, not after the run.
Status check_profile_output(const MachineConfig& config) {
  if (config.guest_profile_path.empty()) {
    return ok();
  }
  const auto interval = config.guest_profile_interval;
  if (interval < GuestProfiler::kMinInterval || interval > GuestProfiler::kMaxInterval) {
    return fail("--profile-interval-us " + std::to_string(interval.count()) + " is out of range",
                "give " + std::to_string(GuestProfiler::kMinInterval.count()) + " to " +
                    std::to_string(GuestProfiler::kMaxInterval.count()));
  }
  const std::filesystem::path path(config.guest_profile_path);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  if (::access(dir.c_str(), W_OK) != 0) {
    return fail_errno(
        "--profile-guest " + config.guest_profile_path + ": directory " + dir.string(), errno,
        "give a path in a writable directory");
  }
  return ok();
}

uint64_t host_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) {
    return 0;
  }
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

}  // namespace

Status validate(const MachineConfig& config, BuildMode mode) {
  if (config.vcpus == 0 || config.vcpus > x86_64::kMaxVcpus) {
    return fail("--vcpus " + std::to_string(config.vcpus) + " is out of range",
                "give 1 to " + std::to_string(x86_64::kMaxVcpus));
  }
  if (config.smt && config.vcpus > 1 && config.vcpus % 2 != 0) {
    return fail(std::to_string(config.vcpus) + " vCPUs with SMT: each core has two threads",
                "give 1 or an even number of vCPUs");
  }
  if (config.memory_mib == 0) {
    return fail("--memory 0: a VM needs memory", "give a size in MiB");
  }
  if (config.memory_mib > x86_64::kMaxRamBytes / x86_64::kMiB) {
    return fail("--memory " + std::to_string(config.memory_mib) +
                " MiB is more than a VM can have");
  }
  const uint64_t host = host_memory_bytes();
  if (host != 0 && config.memory_mib * x86_64::kMiB > host) {
    return fail("--memory " + std::to_string(config.memory_mib) +
                    " MiB is more than this host has (" + std::to_string(host / x86_64::kMiB) +
                    " MiB)",
                "give less memory");
  }
  if (auto ram = x86_64::ram_regions(config.memory_mib * x86_64::kMiB); !ram) {
    return std::unexpected(ram.error().with_context("--memory"));
  }
  if (mode == BuildMode::kBoot) {
    if (config.kernel_path.empty()) {
      return fail("no kernel given", "pass --kernel PATH");
    }
    DSEC_TRY(check_vm_file(config.kernel_path, "kernel"));
    if (!config.initrd_path.empty()) {
      DSEC_TRY(check_vm_file(config.initrd_path, "initrd"));
    }
  }
  DSEC_TRY(check_drives(config.drives));
  if (config.vsock) {
    DSEC_TRY(check_vsock(*config.vsock));
  }
  DSEC_TRY(check_nets(config.nets));
  DSEC_TRY(check_profile_output(config));
  if (virtio_devices(config).size() > x86_64::kMaxVirtioMmioDevices) {
    return fail("more virtio devices than the " + std::to_string(x86_64::kMaxVirtioMmioDevices) +
                " virtio-mmio slots");
  }
  const std::string devices = virtio_cmdline(config);
  const std::string cmdline = guest_cmdline(config);
  if (cmdline.size() + 1 > x86_64::kCmdlineMaxSize) {
    return fail("the kernel command line is " + std::to_string(cmdline.size()) +
                    " bytes, longer than the " + std::to_string(x86_64::kCmdlineMaxSize - 1) +
                    " Linux takes" +
                    (devices.empty() ? std::string()
                                     : " (" + std::to_string(devices.size() + 1) +
                                           " of them announce the virtio devices)"),
                "shorten --cmdline");
  }
  return ok();
}

namespace {

// root= and ro/rw for the root drive, as Firecracker writes them; empty without one.
std::string root_cmdline(const std::vector<DriveConfig>& drives) {
  for (size_t i = 0; i < drives.size(); ++i) {
    const auto& d = drives[i];
    if (d.is_root) {
      const std::string root =
          d.partuuid.empty() ? "/dev/" + guest_drive_name(i) : "PARTUUID=" + d.partuuid;
      return "root=" + root + (d.read_only ? " ro" : " rw");
    }
  }
  return {};
}

}  // namespace

std::string guest_cmdline(const MachineConfig& config) {
  // The VMM's parameters go first: whatever follows a " -- " in the user's part goes to
  // init, not to the kernel.
  std::string cmdline;
  for (const std::string& part :
       {virtio_cmdline(config), root_cmdline(config.drives), config.cmdline}) {
    if (!part.empty()) {
      cmdline += cmdline.empty() ? part : " " + part;
    }
  }
  return cmdline;
}

void take_host_settings(MachineConfig& config, const MachineConfig& host) {
  config.console_output_fd = host.console_output_fd;
  config.console_input_fd = host.console_input_fd;
  config.console_output_limit = host.console_output_limit;
  config.kvm_device = host.kvm_device;
  config.process_start = host.process_start;
  config.seccomp = host.seccomp;
}

}  // namespace dsec::machine

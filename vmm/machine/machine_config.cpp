#include "vmm/machine/machine_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/devices/virtio/net/net.h"
#include "vmm/devices/virtio/net/tap.h"
#include "vmm/machine/guest_profiler.h"
#include "vmm/machine/virtio_devices.h"

namespace dsec::machine {
namespace {

Status check_file(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return fail_errno(std::string(what) + " " + path, errno,
                      errno == ENOENT ? "check the path" : "check its permissions");
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(std::string(what) + " " + path + " is not a regular file");
  }
  return ok();
}

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
    DSEC_TRY(check_file(config.kernel_path, "kernel"));
    if (!config.initrd_path.empty()) {
      DSEC_TRY(check_file(config.initrd_path, "initrd"));
    }
  }
  for (const auto& drive : config.drives) {
    struct stat st {};
    if (::stat(drive.path.c_str(), &st) != 0) {
      return fail_errno("--drive " + drive.path, errno,
                        errno == ENOENT ? "check the path" : "check its permissions");
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
      return fail("--drive " + drive.path + " is neither a regular file nor a block device");
    }
    if (drive.id.size() > 20) {
      return fail("--drive " + drive.path + ": id '" + drive.id + "' is longer than 20 bytes");
    }
  }
  if (config.vsock) {
    const auto& v = *config.vsock;
    if (v.guest_cid < 3 || v.guest_cid > 0xfffffffeULL) {
      return fail("vsock guest CID " + std::to_string(v.guest_cid) + " is reserved or out of range",
                  "give a CID from 3 to 4294967294");
    }
    if (v.uds_path.empty()) {
      return fail("--vsock needs the path of the Unix socket to create");
    }
    struct stat st {};
    if (::lstat(v.uds_path.c_str(), &st) == 0) {
      return fail("--vsock " + v.uds_path + " already exists",
                  "remove it (a VM that ended leaves its socket behind) or choose another path");
    }
  }
  if (config.net) {
    const auto& n = *config.net;
    if (n.tap_fd >= 0 && (!n.tap.empty() || !n.host_cidr.empty())) {
      return fail("--net fd=" + std::to_string(n.tap_fd) +
                      " is a TAP handed in: it takes no "
                      "tap= or host=",
                  "name and address the TAP where it was opened");
    }
    if (n.tap.empty() && n.tap_fd < 0) {
      return fail("--net needs the TAP's name", "give tap=NAME, or fd=N for a TAP handed in");
    }
    if (n.tap.size() > 15) {
      return fail("--net: TAP name '" + n.tap + "' is longer than 15 bytes");
    }
    if (!n.host_cidr.empty()) {
      if (auto cidr = virtio::parse_ipv4_cidr(n.host_cidr); !cidr) {
        return std::unexpected(cidr.error().with_context("--net host="));
      }
    }
    if (!n.mac.empty()) {
      if (auto mac = virtio::parse_mac(n.mac); !mac) {
        return std::unexpected(mac.error().with_context("--net mac="));
      }
    }
  }
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

std::string guest_cmdline(const MachineConfig& config) {
  const std::string devices = virtio_cmdline(config);
  // The devices' parameters go first: whatever follows a " -- " in the user's part goes to
  // init, not to the kernel.
  if (devices.empty()) {
    return config.cmdline;
  }
  return config.cmdline.empty() ? devices : devices + " " + config.cmdline;
}

}  // namespace dsec::machine

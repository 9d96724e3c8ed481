#include "vmm/cli/vm_options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "vmm/cli/cli11.h"
#include "vmm/cli/default_image.h"
#include "vmm/cli/seccomp_option.h"
#include "vmm/image/sandbox_image.h"

namespace dsec::cli {

namespace {

constexpr const char* kNetForms = "give tap=NAME[,host=A.B.C.D/N][,mac=MAC] or fd=N[,mac=MAC]";

// The N of --net fd=N: a descriptor this process inherited, above stderr.
Result<int> parse_fd(const std::string& spec, const std::string& text) {
  int fd = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), fd);
  if (error != std::errc() || end != text.data() + text.size() || fd <= STDERR_FILENO) {
    return fail(fmt::format("--net {}: fd={} is not a file descriptor above 2", spec, text),
                "hand the TAP in as descriptor 3 or above, and give its number");
  }
  return fd;
}

}  // namespace

// "tap=NAME[,host=A.B.C.D/N][,mac=MAC]" or "fd=N[,mac=MAC]" of --net.
Result<machine::NetConfig> parse_net(const std::string& spec) {
  machine::NetConfig net;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string part = spec.substr(start, comma - start);
    start = comma + 1;
    if (part.rfind("tap=", 0) == 0) {
      net.tap = part.substr(4);
    } else if (part.rfind("host=", 0) == 0) {
      net.host_cidr = part.substr(5);
    } else if (part.rfind("mac=", 0) == 0) {
      net.mac = part.substr(4);
    } else if (part.rfind("fd=", 0) == 0) {
      net.tap_fd = DSEC_TRY(parse_fd(spec, part.substr(3)));
    } else {
      return fail(fmt::format("--net {}: unknown option '{}'", spec, part), kNetForms);
    }
  }
  if (net.tap.empty() && net.tap_fd < 0) {
    return fail("--net '" + spec + "' names no TAP", kNetForms);
  }
  if (!net.tap.empty() && net.tap_fd >= 0) {
    return fail("--net '" + spec + "' names a TAP twice (tap= and fd=)", kNetForms);
  }
  return net;
}

// "PATH[,ro][,id=ID]" of --drive.
Result<machine::DriveConfig> parse_drive(const std::string& spec) {
  machine::DriveConfig drive;
  size_t start = 0;
  bool first = true;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string part =
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (first) {
      drive.path = part;
      first = false;
    } else if (part == "ro") {
      drive.read_only = true;
    } else if (part.starts_with("id=")) {
      drive.id = part.substr(3);
    } else {
      return fail(fmt::format("--drive {}: unknown option '{}'", spec, part),
                  "give PATH[,ro][,id=ID]");
    }
    if (comma == std::string::npos) {
      break;
    }
    start = comma + 1;
  }
  if (drive.path.empty()) {
    return fail("--drive '" + spec + "' names no file", "give PATH[,ro][,id=ID]");
  }
  return drive;
}

void add_vm_options(CLI::App& command, VmOptions& options) {
  command
      .add_option("--kernel", options.kernel,
                  "Kernel: an ELF vmlinux (PVH or 64-bit entry) or a bzImage")
      ->check(CLI::ExistingFile);
  command.add_option("--initrd", options.initrd, "Initramfs to load with the kernel")
      ->check(CLI::ExistingFile);
  command.add_option("--cmdline", options.cmdline, "Kernel command line")->capture_default_str();
  command.add_option("--append", options.append, "Words to add to the command line (repeatable)");
  command.add_option("--vcpus", options.vcpus, "Number of vCPUs")->capture_default_str();
  command.add_option("--memory", options.memory_mib, "Guest memory in MiB")->capture_default_str();
  command.add_flag("--share-kernel-pages", options.share_kernel_pages,
                   "Map a vmlinux's pages copy-on-write from the page cache instead of copying "
                   "them: VMs booting the same file share them (less memory per VM), but the boot "
                   "is slower (each page the guest writes is a copy-on-write fault). No effect on "
                   "a bzImage");
  command.add_flag("--rng", options.rng,
                   "Give the guest a virtio-rng device (/dev/hwrng) fed by the host's getrandom(); "
                   "off by default");
  command
      .add_option("--drive", options.drives,
                  "A virtio-blk disk: PATH[,ro][,id=ID] (repeatable; the first is /dev/vda)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command.add_option("--vsock", options.vsock,
                     "Give the guest a virtio-vsock device; host processes reach guest port P by "
                     "connecting to this Unix socket (created here, must not exist) and sending "
                     "'CONNECT P\\n' (dsec-vmm exec does); guest connections to host port P go to "
                     "PATH_P");
  command.add_option("--vsock-cid", options.vsock_cid, "The guest's vsock CID")
      ->capture_default_str();
  command.add_option("--net", options.net,
                     "Give the guest a virtio-net device (eth0) on a host TAP: "
                     "tap=NAME[,host=A.B.C.D/N][,mac=MAC]. The TAP is created if it does not exist "
                     "(needs CAP_NET_ADMIN and the tun module); host= gives it that IPv4 address "
                     "and brings it up; the guest configures its side itself. MAC defaults to "
                     "52:54:00:12:34:56. fd=N[,mac=MAC] instead uses a TAP handed in open as "
                     "descriptor N (a jailed VMM's way to the host's network: docs/jail.md)");
  add_seccomp_option(command, options.seccomp);
  command.add_option("--image", options.image,
                     "Boot this sandbox image (EROFS, from images/build-rootfs or dsec-vmm image "
                     "import) as the root file system, with the default kernel and initramfs: it "
                     "is /dev/vda, read-only, shared by every VM that boots it; the guest's writes "
                     "go to a private overlay in guest memory (docs/images.md)");
  command
      .add_option("--scratch", options.scratch,
                  "With --image: keep the overlay's writes on this ext4 disk (/dev/vdb, "
                  "read-write, one per VM) instead of in guest memory")
      ->needs("--image");
}

namespace {

// --image: the image goes first (/dev/vda, read-only), then --scratch (/dev/vdb), then
// the --drive disks; the command line tells dsec-init to boot the image.
Status add_image(const VmOptions& o, machine::MachineConfig& config) {
  DSEC_TRY(image::check_sandbox_image(o.image));
  std::vector<machine::DriveConfig> first{{.path = o.image, .read_only = true, .id = {}}};
  config.cmdline += std::string(" ") + image::kImageRootArgs;
  if (!o.scratch.empty()) {
    first.push_back({.path = o.scratch, .read_only = false, .id = {}});
    config.cmdline += std::string(" ") + image::kScratchUpperArg;
  }
  config.drives.insert(config.drives.begin(), first.begin(), first.end());
  return ok();
}

}  // namespace

Result<machine::MachineConfig> machine_config(const VmOptions& o,
                                              std::chrono::steady_clock::time_point process_start) {
  machine::MachineConfig config;
  config.process_start = process_start;
  config.vcpus = o.vcpus;
  config.memory_mib = o.memory_mib;
  config.cmdline = o.cmdline;
  for (const auto& extra : o.append) {
    config.cmdline += " " + extra;
  }
  config.kernel_path = o.kernel;
  config.initrd_path = o.initrd;
  config.rng = o.rng;
  config.share_kernel_pages = o.share_kernel_pages;
  auto seccomp = seccomp::policy_for(o.seccomp);
  if (!seccomp) {
    return std::unexpected(seccomp.error());
  }
  config.seccomp = *seccomp;
  for (const auto& spec : o.drives) {
    auto drive = parse_drive(spec);
    if (!drive) {
      return std::unexpected(drive.error());
    }
    config.drives.push_back(*drive);
  }
  if (!o.image.empty()) {
    if (auto added = add_image(o, config); !added) {
      return std::unexpected(added.error());
    }
  }
  if (!o.vsock.empty()) {
    config.vsock = machine::VsockConfig{o.vsock_cid, o.vsock};
  }
  if (!o.net.empty()) {
    auto net = parse_net(o.net);
    if (!net) {
      return std::unexpected(net.error());
    }
    config.nets = {*net};
  }
  if (config.kernel_path.empty() || config.initrd_path.empty()) {
    auto image = find_default_image();
    if (!image) {
      return std::unexpected(image.error());
    }
    if (config.kernel_path.empty()) {
      config.kernel_path = image->kernel;
    }
    if (config.initrd_path.empty()) {
      config.initrd_path = image->initrd;
      // Our init announces clean reboots; anything else is a crash.
      config.expect_clean_shutdown_announcement = true;
    }
  }
  return config;
}

}  // namespace dsec::cli

// What a VM is made of, as the user asked for it. validate() checks it before any KVM call.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vmm/mmds/mmds_config.h"
#include "vmm/common/error.h"
#include "vmm/devices/rate_limiter_config.h"
#include "vmm/seccomp/policy.h"

namespace dsec::machine {

// The command line a guest boots with when none is given: the console on COM1, reboot
// through the i8042 (there is no ACPI), and a panic ends the VM instead of hanging it.
inline constexpr const char* kDefaultCmdline = "console=ttyS0 reboot=k panic=-1 quiet";

// A virtio-blk drive on a host file or block device.
struct DriveConfig {
  std::string path;
  bool read_only = false;
  // The drive's id; its first 20 bytes are GET_ID's answer. Empty: one derived from the file.
  std::string id;
  // The guest's root file system (Firecracker's is_root_device): its command line gets
  // root=/dev/vdX, or root=PARTUUID=<partuuid> when one is given, then ro or rw. At most
  // one drive of a VM.
  bool is_root = false;
  std::string partuuid{};
  // Firecracker's rate_limiter (docs/api-boot.md): none by default.
  devices::RateLimiterConfig rate_limiter{};

  bool operator==(const DriveConfig&) const = default;
};

// A virtio-vsock device with Firecracker's host side: a Unix socket at uds_path that host
// processes connect to (`CONNECT <port>\n`); guest connections to host port P reach
// `<uds_path>_<P>`.
struct VsockConfig {
  uint64_t guest_cid = 3;
  std::string uds_path;

  bool operator==(const VsockConfig&) const = default;
};

// A virtio-net device on a host TAP interface (created if it does not exist), or on a TAP
// handed in open.
struct NetConfig {
  std::string tap;        // the TAP interface's name
  std::string host_cidr;  // optional: the host side's IPv4 address, e.g. 10.99.0.1/24
  std::string mac;        // the guest's MAC address; empty: kDefaultGuestMac
  // A TAP opened by whoever started the VMM (--net fd=N), used instead of `tap`; its
  // address is theirs to set (host_cidr stays empty).
  int tap_fd = -1;
  // The interface's id on the API (Firecracker's iface_id); empty: kDefaultId (only the
  // command line's one interface leaves it empty).
  std::string id{};
  // Firecracker's rx_rate_limiter and tx_rate_limiter: none by default.
  devices::RateLimiterConfig rx_rate_limiter{};
  devices::RateLimiterConfig tx_rate_limiter{};

  static constexpr const char* kDefaultGuestMac = "52:54:00:12:34:56";
  static constexpr const char* kDefaultId = "eth0";  // the guest's name for it
  std::string iface_id() const { return id.empty() ? kDefaultId : id; }
  // The MAC the guest gets as interface `index` of MachineConfig::nets: `mac`, or else
  // kDefaultGuestMac with `index` added to its last byte, so that two interfaces without
  // one still differ.
  std::string guest_mac(size_t index) const;
  bool operator==(const NetConfig&) const = default;
};

struct MachineConfig {
  std::string kernel_path;  // ELF vmlinux (PVH or 64-bit entry) or bzImage
  std::string initrd_path;  // optional
  std::string cmdline;
  uint32_t vcpus = 1;
  // Firecracker's smt: the guest sees vCPUs 2k and 2k+1 as the two threads of one core
  // (an even vcpus, or 1); otherwise each vCPU is a core of its own.
  bool smt = false;
  uint64_t memory_mib = 128;
  // A vmlinux's pages: copied (the faster boot) or shared copy-on-write from the page
  // cache with every VM booting the same file (x86_64::KernelPages).
  bool share_kernel_pages = false;
  int console_output_fd = STDOUT_FILENO;  // where the guest's serial output goes
  int console_input_fd = -1;              // what the guest's serial port reads; -1: nothing
  // Bytes of the guest's console output written to console_output_fd, after which the rest
  // is dropped (machine/console.h); 0: no limit.
  uint64_t console_output_limit = 0;
  // The guest's init announces a deliberate reboot on the boot-timer port (our default
  // image does). A reboot without that announcement is then a crash (a kernel panic with
  // panic=-1 reboots too).
  bool expect_clean_shutdown_announcement = false;
  std::string kvm_device = "/dev/kvm";
  // virtio devices (machine/virtio_devices.h); each takes the next virtio-mmio slot, in
  // this order: the drives (the first is the guest's /dev/vda), vsock, the network
  // interfaces (the first is the guest's eth0, the next eth1, ...), rng.
  std::vector<DriveConfig> drives;
  std::optional<VsockConfig> vsock;
  std::vector<NetConfig> nets;
  // Firecracker's MMDS: the interfaces it names answer for the metadata service; none
  // without it.
  std::optional<mmds::MmdsConfig> mmds;
  bool rng = false;                               // virtio-rng: entropy from the host's getrandom()
  devices::RateLimiterConfig rng_rate_limiter{};  // its rate limiter (Firecracker's entropy's)
  // Where to write a guest profile (machine/guest_profiler.h) when the VM ends; empty: none.
  std::string guest_profile_path;
  std::chrono::microseconds guest_profile_interval{1000};
  // When the VMM process started, for the boot-time figures.
  std::chrono::steady_clock::time_point process_start = std::chrono::steady_clock::now();
  // The seccomp filters the VM's threads install (docs/seccomp.md); the host's choice, not
  // kept in a snapshot.
  seccomp::Policy seccomp;
};

// What a config is checked for: a boot (a kernel, its command line) or a restore from a
// snapshot (neither: the guest's memory has them).
enum class BuildMode { kBoot, kRestore };

// The checks that need no file contents: vCPU count, memory size and alignment against
// what the host has, files that exist, the command line's length (with the parameters
// that announce the virtio devices). Machine::create() then
// loads the kernel and initrd into guest memory (is it a kernel, does the initrd fit?)
// before its first KVM call.
Status validate(const MachineConfig& config, BuildMode mode = BuildMode::kBoot);

// The command line the guest kernel gets: the parameters that announce the virtio
// devices, then the root drive's root= and ro/rw, then `cmdline`.
std::string guest_cmdline(const MachineConfig& config);

// `config` with what only the host decides, taken from `host`: the console's fds, the KVM
// device, the process start and the seccomp policy.
void take_host_settings(MachineConfig& config, const MachineConfig& host);

}  // namespace dsec::machine

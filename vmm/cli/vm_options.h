// The options that describe a VM, shared by `dsec-vmm run` and `dsec-vmm warm`, and their
// turning into a MachineConfig.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/machine/machine_config.h"
#include "vmm/seccomp/policy.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dsec::cli {

struct VmOptions {
  std::string kernel;
  std::string initrd;
  std::string cmdline = machine::kDefaultCmdline;
  std::vector<std::string> append;
  uint32_t vcpus = 1;
  uint64_t memory_mib = 128;
  bool rng = false;
  bool share_kernel_pages = false;
  std::vector<std::string> drives;  // PATH[,ro][,id=ID]
  std::string vsock;                // the vsock device's Unix socket; empty: no vsock
  uint64_t vsock_cid = 3;
  std::string net;  // tap=NAME[,host=A.B.C.D/N][,mac=MAC] or fd=N[,mac=MAC]; empty: none
  seccomp::Mode seccomp = seccomp::Mode::kOn;
  std::string image;    // a sandbox image (EROFS) booted as the root; empty: the initramfs
  std::string scratch;  // an ext4 disk for the image's private writes; empty: a tmpfs
};

// Registers the options above on `command`.
void add_vm_options(CLI::App& command, VmOptions& options);

// "tap=NAME[,host=A.B.C.D/N][,mac=MAC]" or "fd=N[,mac=MAC]" of --net.
Result<machine::NetConfig> parse_net(const std::string& spec);
// "PATH[,ro][,id=ID]" of --drive.
Result<machine::DriveConfig> parse_drive(const std::string& spec);

// The MachineConfig of `options`, the default image filling in a missing kernel or initrd,
// and the seccomp policy of --seccomp (seccomp::policy_for).
Result<machine::MachineConfig> machine_config(const VmOptions& options,
                                              std::chrono::steady_clock::time_point process_start);

}  // namespace dsec::cli

// One part of a MachineConfig at a time: the checks validate() makes of each part, for
// callers that take a VM's parts one by one (the API's pre-boot requests, preboot_config),
// and the guest's name for a drive. No KVM, no file contents: stat() at most.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/machine/machine_config.h"

namespace dsec::machine {

// The file exists and is a regular file, or, with `block_device`, a block device. `what`
// begins the message ("kernel", "initrd_path").
Status check_vm_file(const std::string& path, const std::string& what, bool block_device = false);
// Each drive's file and partuuid; at most one root drive.
Status check_drives(const std::vector<DriveConfig>& drives);
// The CID is not reserved and the socket's path is free.
Status check_vsock(const VsockConfig& vsock);
// A TAP by name (at most 15 bytes) or handed in, and a valid address and MAC.
Status check_net(const NetConfig& net);
// Each interface's check_net, and no two with the same iface_id, TAP or guest MAC (as
// Firecracker refuses them).
Status check_nets(const std::vector<NetConfig>& nets);

// The guest's name for drive `index` (its place in MachineConfig::drives): vda, vdb, ...
std::string guest_drive_name(size_t index);

}  // namespace dsec::machine

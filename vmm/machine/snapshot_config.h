// The part of a MachineConfig a snapshot keeps (the "config" section of its state file):
// what the restored VM must be built from before its state goes in. vCPUs, memory, the
// virtio devices and how the guest ends; not the kernel, the command line or the console,
// which a restored guest no longer needs or gets anew.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/machine/machine_config.h"

namespace dsec::machine {

std::string snapshot_config_to_json(const MachineConfig& config);
// Strict: a field of the wrong type, a missing one or one it does not know is refused.
Result<MachineConfig> snapshot_config_from_json(std::string_view json);
// The configuration in the state file at `state_path`, the file checked whole first.
Result<MachineConfig> read_snapshot_config(const std::string& state_path);

// A network interface's host side anew at restore (`restore --net`, Firecracker's
// network_overrides). An absent field keeps the snapshot's.
struct NetOverride {
  // The interface it is for (the API's iface_id), one the snapshot has; nullopt: the
  // snapshot's first interface (the guest's eth0).
  std::optional<std::string> iface_id{};
  std::optional<std::string> tap{};
  std::optional<int> tap_fd{};  // a TAP handed in open, instead of the snapshot's by name
  std::optional<std::string> host_cidr{};
  std::optional<std::string> mac{};
  // Its rate limiters, replacing the snapshot's (restore --net-rate-limiters).
  std::optional<devices::RateLimiterConfig> rx_rate_limiter{};
  std::optional<devices::RateLimiterConfig> tx_rate_limiter{};
};

// What a clone may get anew at restore, where identity matters (its sockets, its network
// devices, its disks' files). An absent field keeps the snapshot's.
struct RestoreOverrides {
  std::optional<std::string> vsock_uds_path;
  std::optional<uint64_t> vsock_guest_cid;
  // At most one for each of the snapshot's interfaces.
  std::vector<NetOverride> nets;
  // Drive i's file, by position; nullopt or past the end keeps the snapshot's.
  std::vector<std::optional<std::string>> drive_paths;
  // The snapshot's state is not trusted to choose a host resource (`restore
  // --no-host-paths-from-snapshot`, as the pool restores): every drive's file, the vsock
  // socket and the TAP must come from the overrides, and the host address of the
  // snapshot's TAP is dropped.
  bool refuse_snapshot_host_paths = false;
};

// Applies `overrides` to a snapshot's configuration; fails when one names a device the
// snapshot has not (a vsock socket for a VM without vsock, a third drive of two), or
// when the snapshot would choose a host resource that refuse_snapshot_host_paths forbids.
Result<MachineConfig> apply_overrides(MachineConfig config, const RestoreOverrides& overrides);

}  // namespace dsec::machine

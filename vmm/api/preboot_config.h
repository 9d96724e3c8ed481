// Firecracker's pre-boot state (its VmResources): the VM a fresh VMM will boot, put
// together one request at a time, as a machine::MachineConfig. Each request is checked
// when it comes, as Firecracker does (a kernel that is not there, a second root drive, a
// vCPU count out of range), so that a refusal names the request that caused it, and a
// refused request changes nothing. InstanceStart then boots config() through the same
// validate() and builder as `dsec-vmm run` (machine::Machine::create).
//
// Firecracker's rules kept here: a drive or interface PUT again under its id replaces
// it; the root drive goes first, so it is the guest's /dev/vda; there is one root drive.
// The interfaces are the guest's eth0, eth1, ... in the order their ids first came; two
// with the same TAP or guest MAC are refused.
#pragma once

#include "vmm/api/preboot_requests.h"
#include "vmm/common/error.h"
#include "vmm/machine/machine_config.h"

namespace dsec::api {

class PrebootConfig {
 public:
  // Firecracker's defaults: 1 vCPU, 128 MiB, no boot source, no devices.
  PrebootConfig();

  Status set_boot_source(const BootSourceRequest& request);
  Status update_machine_config(const MachineConfigUpdate& update);
  Status put_drive(const DriveRequest& request);
  Status put_network_interface(const NetworkInterfaceRequest& request);
  Status set_vsock(const VsockRequest& request);
  void set_entropy(const EntropyRequest& request);
  // PUT /mmds/config (its interfaces already checked against config().nets).
  void set_mmds_config(const mmds::MmdsConfig& config);
  // The ids of the interfaces configured so far.
  std::vector<std::string> iface_ids() const;

  // Whether a request above configured a boot: a snapshot load is then refused, as in
  // Firecracker (the logger does not count).
  bool configures_a_boot() const { return configures_a_boot_; }
  // What is configured so far (GET /vm/config and /machine-config before the start).
  const machine::MachineConfig& config() const { return config_; }
  // The VM to boot: config(), which must have a boot source.
  Result<machine::MachineConfig> boot_config() const;

 private:
  machine::MachineConfig config_;
  bool configures_a_boot_ = false;
};

}  // namespace dsec::api

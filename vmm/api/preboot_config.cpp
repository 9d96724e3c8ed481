#include "vmm/api/preboot_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/arch/x86_64/layout.h"
#include "vmm/machine/config_parts.h"

namespace dsec::api {

PrebootConfig::PrebootConfig() {
  config_.vcpus = 1;
  config_.memory_mib = 128;
  config_.cmdline = machine::kDefaultCmdline;
}

Status PrebootConfig::set_boot_source(const BootSourceRequest& request) {
  DSEC_TRY(machine::check_vm_file(request.kernel_image_path, "kernel_image_path"));
  if (!request.initrd_path.empty()) {
    DSEC_TRY(machine::check_vm_file(request.initrd_path, "initrd_path"));
  }
  config_.kernel_path = request.kernel_image_path;
  config_.initrd_path = request.initrd_path;
  config_.cmdline = request.boot_args.value_or(machine::kDefaultCmdline);
  configures_a_boot_ = true;
  return ok();
}

Status PrebootConfig::update_machine_config(const MachineConfigUpdate& update) {
  const uint32_t vcpus = update.vcpu_count.value_or(config_.vcpus);
  const uint64_t memory_mib = update.mem_size_mib.value_or(config_.memory_mib);
  const bool smt = update.smt.value_or(config_.smt);
  if (vcpus == 0 || vcpus > x86_64::kMaxVcpus) {
    return fail(
        fmt::format("'vcpu_count' {} is out of range: give 1 to {}", vcpus, x86_64::kMaxVcpus));
  }
  if (smt && vcpus > 1 && vcpus % 2 != 0) {
    return fail(fmt::format(
        "'vcpu_count' {} with 'smt': true: each core has two threads; give 1 or an even number",
        vcpus));
  }
  if (memory_mib == 0 || memory_mib > x86_64::kMaxRamBytes / x86_64::kMiB) {
    return fail(fmt::format("'mem_size_mib' {} is out of range: give 1 to {}", memory_mib,
                            x86_64::kMaxRamBytes / x86_64::kMiB));
  }
  config_.vcpus = vcpus;
  config_.smt = smt;
  config_.memory_mib = memory_mib;
  configures_a_boot_ = true;
  return ok();
}

Status PrebootConfig::put_drive(const DriveRequest& request) {
  const machine::DriveConfig drive{.path = request.path_on_host,
                                   .read_only = request.is_read_only,
                                   .id = request.drive_id,
                                   .is_root = request.is_root_device,
                                   .partuuid = request.partuuid,
                                   .rate_limiter = request.rate_limiter};
  auto drives = config_.drives;
  const auto same_id = std::ranges::find(drives, request.drive_id, &machine::DriveConfig::id);
  if (same_id != drives.end()) {
    *same_id = drive;
  } else {
    drives.push_back(drive);
  }
  // The root drive first: it is the guest's /dev/vda, whatever order the requests came in.
  std::ranges::stable_partition(drives, &machine::DriveConfig::is_root);
  if (auto checked = machine::check_drives(drives); !checked) {
    return std::unexpected(checked.error().with_context("drive '" + request.drive_id + "'"));
  }
  config_.drives = std::move(drives);
  configures_a_boot_ = true;
  return ok();
}

Status PrebootConfig::put_network_interface(const NetworkInterfaceRequest& request) {
  machine::NetConfig net;
  net.id = request.iface_id;
  net.tap = request.host_dev_name;
  net.mac = request.guest_mac;
  net.rx_rate_limiter = request.rx_rate_limiter;
  net.tx_rate_limiter = request.tx_rate_limiter;
  auto nets = config_.nets;
  const auto same_id = std::ranges::find(nets, request.iface_id, &machine::NetConfig::id);
  if (same_id != nets.end()) {
    *same_id = std::move(net);  // the guest's eth<N> stays the same interface
  } else {
    nets.push_back(std::move(net));
  }
  DSEC_TRY(machine::check_nets(nets));
  config_.nets = std::move(nets);
  configures_a_boot_ = true;
  return ok();
}

Status PrebootConfig::set_vsock(const VsockRequest& request) {
  const machine::VsockConfig vsock{.guest_cid = request.guest_cid, .uds_path = request.uds_path};
  DSEC_TRY(machine::check_vsock(vsock));
  config_.vsock = vsock;
  configures_a_boot_ = true;
  return ok();
}

void PrebootConfig::set_entropy(const EntropyRequest& request) {
  config_.rng = true;
  config_.rng_rate_limiter = request.rate_limiter;
  configures_a_boot_ = true;
}

Result<machine::MachineConfig> PrebootConfig::boot_config() const {
  if (config_.kernel_path.empty()) {
    return fail(
        "cannot start the VM without a kernel: PUT /boot-source with kernel_image_path "
        "first");
  }
  return config_;
}

void PrebootConfig::set_mmds_config(const mmds::MmdsConfig& config) {
  config_.mmds = config;
  configures_a_boot_ = true;
}

std::vector<std::string> PrebootConfig::iface_ids() const {
  std::vector<std::string> ids;
  ids.reserve(config_.nets.size());
  for (const auto& net : config_.nets) {
    ids.push_back(net.iface_id());
  }
  return ids;
}

}  // namespace dsec::api

#include "vmm/api/vm_config_json.h"

#include <string>

#include "vmm/api/mmds_requests.h"
#include "vmm/devices/rate_limiter_json.h"
#include "vmm/machine/config_parts.h"

namespace dsec::api {

using nlohmann::json;

namespace {

// Firecracker's shape: null for a device without a limit.
json rate_limiter_or_null(const devices::RateLimiterConfig& limiter) {
  return limiter == devices::RateLimiterConfig{} ? json(nullptr)
                                                 : devices::rate_limiter_json(limiter);
}

}  // namespace

json machine_config_json(const machine::MachineConfig& config) {
  return {{"vcpu_count", config.vcpus},
          {"mem_size_mib", config.memory_mib},
          {"smt", config.smt},
          {"track_dirty_pages", false},
          // Guest memory is always advised for transparent huge pages (api-boot.md).
          {"huge_pages", "Transparent"}};
}

json vm_config_json(const machine::MachineConfig& config) {
  json boot_source = nullptr;
  if (!config.kernel_path.empty()) {
    boot_source = {
        {"kernel_image_path", config.kernel_path},
        {"initrd_path", config.initrd_path.empty() ? json(nullptr) : json(config.initrd_path)},
        {"boot_args", config.cmdline}};
  }
  json drives = json::array();
  for (size_t i = 0; i < config.drives.size(); ++i) {
    const auto& d = config.drives[i];
    drives.push_back({{"drive_id", d.id.empty() ? machine::guest_drive_name(i) : d.id},
                      {"path_on_host", d.path},
                      {"is_root_device", d.is_root},
                      {"partuuid", d.partuuid.empty() ? json(nullptr) : json(d.partuuid)},
                      {"is_read_only", d.read_only},
                      // What every disk here is, whatever the PUT asked: served through
                      // io_uring, the guest's flushes honoured (api-boot.md).
                      {"cache_type", "Writeback"},
                      {"io_engine", "Async"},
                      {"socket", nullptr},
                      {"rate_limiter", rate_limiter_or_null(d.rate_limiter)}});
  }
  json nets = json::array();
  for (size_t i = 0; i < config.nets.size(); ++i) {
    const auto& n = config.nets[i];
    nets.push_back({{"iface_id", n.iface_id()},
                    {"host_dev_name", n.tap},
                    {"guest_mac", n.guest_mac(i)},
                    {"mtu", nullptr},
                    {"rx_rate_limiter", rate_limiter_or_null(n.rx_rate_limiter)},
                    {"tx_rate_limiter", rate_limiter_or_null(n.tx_rate_limiter)}});
  }
  json vsock = nullptr;
  if (config.vsock) {
    vsock = {{"guest_cid", config.vsock->guest_cid}, {"uds_path", config.vsock->uds_path}};
  }
  // Every key of Firecracker's FullVmConfiguration. What dsec-vmm has no device or
  // setting for is null (or empty), as Firecracker answers for one not configured; logger
  // and metrics are null as Firecracker always has them here.
  return {
      {"balloon", nullptr},
      {"drives", drives},
      {"boot-source", boot_source},
      {"cpu-config", nullptr},
      {"logger", nullptr},
      {"machine-config", machine_config_json(config)},
      {"metrics", nullptr},
      {"memory-hotplug", nullptr},
      {"mmds-config", config.mmds ? mmds_config_json(*config.mmds) : json(nullptr)},
      {"network-interfaces", nets},
      {"pmem", json::array()},
      {"vsock", vsock},
      {"entropy", config.rng ? json{{"rate_limiter", rate_limiter_or_null(config.rng_rate_limiter)}}
                             : json(nullptr)}};
}

}  // namespace dsec::api

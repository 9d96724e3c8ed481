#include "vmm/api/vm_config_json.h"

#include <string>

#include "vmm/api/vm_requests.h"

namespace dsec::api {

using nlohmann::json;

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
    // Drives are /dev/vda, vdb, ... in the guest, in order (virtio_devices.h).
    const std::string guest_name =
        i < 26 ? "vd" + std::string(1, static_cast<char>('a' + i)) : "drive" + std::to_string(i);
    drives.push_back({{"drive_id", d.id.empty() ? guest_name : d.id},
                      {"path_on_host", d.path},
                      {"is_read_only", d.read_only}});
  }
  json nets = json::array();
  if (config.net) {
    nets.push_back({{"iface_id", kNetIfaceId},
                    {"host_dev_name", config.net->tap},
                    {"guest_mac", config.net->mac.empty() ? machine::NetConfig::kDefaultGuestMac
                                                          : config.net->mac}});
  }
  json vsock = nullptr;
  if (config.vsock) {
    vsock = {{"guest_cid", config.vsock->guest_cid}, {"uds_path", config.vsock->uds_path}};
  }
  return {{"machine-config",
           {{"vcpu_count", config.vcpus},
            {"mem_size_mib", config.memory_mib},
            {"smt", false},
            {"track_dirty_pages", false}}},
          {"boot-source", boot_source},
          {"drives", drives},
          {"network-interfaces", nets},
          {"vsock", vsock},
          {"entropy", config.rng ? json::object() : json(nullptr)}};
}

}  // namespace dsec::api

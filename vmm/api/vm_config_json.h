// A MachineConfig in the shape of Firecracker's GET /vm/config: machine-config,
// boot-source, drives, network-interfaces, vsock and entropy.
#pragma once

#include <nlohmann/json.hpp>

#include "vmm/machine/machine_config.h"

namespace dsec::api {

// GET /machine-config: {"vcpu_count", "mem_size_mib", "smt", "track_dirty_pages"}.
nlohmann::json machine_config_json(const machine::MachineConfig& config);

// boot-source is null for a VM restored from a snapshot (a snapshot keeps no kernel). A
// drive's id is its configured id, else the guest's name for it (vda, vdb, ...).
nlohmann::json vm_config_json(const machine::MachineConfig& config);

}  // namespace dsec::api

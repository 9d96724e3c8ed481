// For tests of the pool's bookkeeping: a directory with a warm image's two files, enough
// for the pool to register it (a state file whose configuration has only a vsock device,
// as `dsec-vmm warm` makes; no vCPU or device state) and a memory file of a given size. A
// clone of it would fail to restore.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "vmm/machine/machine_config.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/snapshot/state_file.h"

namespace dsec::test {

// Writes DIR/state and DIR/memory (DIR made if missing); `config` is the configuration the
// state file says it was taken of. Returns whether both were written.
inline bool write_stand_in_image(const std::filesystem::path& dir, size_t memory_bytes,
                                 const machine::MachineConfig& config) {
  std::filesystem::create_directories(dir);
  const std::string json = machine::snapshot_config_to_json(config);
  snapshot::StateFileWriter state;
  if (!state.add("config", {json.begin(), json.end()}) || !state.write((dir / "state").string())) {
    return false;
  }
  std::ofstream memory(dir / "memory", std::ios::binary);
  memory << std::string(memory_bytes, '\0');
  return memory.good();
}

// The configuration of a warm image: 1 vCPU, 128 MiB, a vsock device.
inline machine::MachineConfig stand_in_config() {
  machine::MachineConfig config;
  config.vcpus = 1;
  config.memory_mib = 128;
  config.vsock = machine::VsockConfig{.guest_cid = 3, .uds_path = "/run/warm.vsock"};
  return config;
}

inline bool write_stand_in_image(const std::filesystem::path& dir, size_t memory_bytes) {
  return write_stand_in_image(dir, memory_bytes, stand_in_config());
}

// A stand-in image `name` in the pool's image store `store` (made if missing): its directory
// 0700 and its files 0600, as the store takes them (the daemon's, writable by nobody else).
// Returns the image's directory, empty when it was not written.
inline std::filesystem::path write_store_image(
    const std::filesystem::path& store, const std::string& name, size_t memory_bytes,
    const machine::MachineConfig& config = stand_in_config()) {
  namespace fs = std::filesystem;
  const fs::path image = store / name;
  if (!write_stand_in_image(image, memory_bytes, config)) {
    return {};
  }
  constexpr auto kOwnerRw = fs::perms::owner_read | fs::perms::owner_write;
  fs::permissions(store, fs::perms::owner_all);
  fs::permissions(image, fs::perms::owner_all);
  fs::permissions(image / "state", kOwnerRw);
  fs::permissions(image / "memory", kOwnerRw);
  return image;
}

}  // namespace dsec::test

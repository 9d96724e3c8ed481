// A snapshot directory: what `dsec-vmm warm` and `dsec-vmm snapshot create` write and
// `dsec-vmm restore` reads (docs/snapshots.md).
#pragma once

#include <filesystem>
#include <string>

namespace dsec::snapshot {

struct SnapshotFiles {
  std::string state;   // the state file (docs/snapshot-format.md)
  std::string memory;  // the memory file
};

inline SnapshotFiles snapshot_files(const std::filesystem::path& dir) {
  return {.state = (dir / "state").string(), .memory = (dir / "memory").string()};
}

}  // namespace dsec::snapshot

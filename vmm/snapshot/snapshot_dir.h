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

// The two files' names in their directory.
inline constexpr const char* kStateFileName = "state";
inline constexpr const char* kMemoryFileName = "memory";

inline SnapshotFiles snapshot_files(const std::filesystem::path& dir) {
  return {.state = (dir / kStateFileName).string(), .memory = (dir / kMemoryFileName).string()};
}

}  // namespace dsec::snapshot

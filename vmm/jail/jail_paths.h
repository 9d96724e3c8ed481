// The paths a jailed VMM uses. It opens most files before it pivots into its jail (the
// kernel, the snapshot, the drives: given as host paths, made absolute) and some after
// (its vsock socket's PATH_PORT, the metrics file, API snapshots): those must be inside
// the jail directory, and become paths relative to it. The jailed process's working
// directory is the jail directory from its start, and stays it across the pivot, so a
// relative path names the same file before and after.
#pragma once

#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec::jail {

class JailPaths {
 public:
  // `dir` made absolute with its symbolic links resolved; it must exist.
  static Result<JailPaths> of(const std::string& dir);

  // The jail directory, canonical.
  const std::string& dir() const { return dir_; }

  // `host_path` (which need not exist) relative to the jail directory; fails, naming
  // `option`, when it is not below it (symbolic links resolved).
  Result<std::string> inside(const std::string& host_path, std::string_view option) const;

  // `path` made absolute against the current working directory (empty stays empty).
  static std::string outside(const std::string& path);

 private:
  explicit JailPaths(std::string dir) : dir_(std::move(dir)) {}

  std::string dir_;
};

}  // namespace dsec::jail

#include "vmm/jail/jail_paths.h"

#include <filesystem>

namespace dsec::jail {

namespace fs = std::filesystem;

Result<JailPaths> JailPaths::of(const std::string& dir) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec) {
    return fail_errno("--jail " + dir, ec.value(), "create the directory first");
  }
  return JailPaths(canonical.string());
}

Result<std::string> JailPaths::inside(const std::string& host_path, std::string_view option) const {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(host_path, ec), ec);
  if (ec) {
    return fail_errno(std::string(option) + " " + host_path, ec.value());
  }
  const fs::path relative = resolved.lexically_relative(dir_);
  if (relative.empty() || relative == "." || *relative.begin() == "..") {
    return fail(std::string(option) + " " + host_path + " is outside the jail " + dir_,
                "a jailed VMM reaches only files in its jail directory: put it there, e.g. " +
                    (fs::path(dir_) / resolved.filename()).string());
  }
  return relative.string();
}

std::string JailPaths::outside(const std::string& path) {
  if (path.empty()) {
    return path;
  }
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  return ec ? path : absolute.string();
}

}  // namespace dsec::jail

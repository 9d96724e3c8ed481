// For end-to-end tests: the Debian images that images/build-rootfs and build-rootfs-ext4
// keep in the cache. Empty, and the test failed saying how to build it, if it is not built:
// an e2e test never skips.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"

namespace dsec::test {

// The file an images/ build script (`script`: build-rootfs, build-rootfs-ext4) has in the
// cache: the `image=` line of its --print.
inline std::filesystem::path cached_image(const std::string& script) {
  const ProcessOutput found = run_process({dsec::test::source_path("/images/") + script, "--print"},
                                          std::chrono::seconds(60));
  constexpr std::string_view kKey = "image=";
  const size_t at = found.out.find(kKey);
  if (found.exit_status != 0 || at == std::string::npos) {
    ADD_FAILURE() << "the image is not built: run images/" << script << "\n" << found.describe();
    return {};
  }
  std::string path = found.out.substr(at + kKey.size());
  path = path.substr(0, path.find('\n'));
  return path;
}

// The Debian sandbox image (EROFS).
inline std::filesystem::path debian_image() {
  return cached_image("build-rootfs");
}

// The Debian userland as an ext4 root file system, with console-init as /sbin/init.
inline std::filesystem::path debian_ext4_rootfs() {
  return cached_image("build-rootfs-ext4");
}

}  // namespace dsec::test

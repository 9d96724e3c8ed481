// For end-to-end tests: the Debian sandbox image that images/build-rootfs keeps in the
// cache. Empty, and the test failed saying how to build it, if it is not built: an e2e
// test never skips.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "tests/support/run_command.h"

namespace dsec::test {

inline std::filesystem::path debian_image() {
  const ProcessOutput found =
      run_process({DSEC_SOURCE_DIR "/images/build-rootfs", "--print"}, std::chrono::seconds(60));
  constexpr std::string_view kKey = "image=";
  const size_t at = found.out.find(kKey);
  if (found.exit_status != 0 || at == std::string::npos) {
    ADD_FAILURE() << "the Debian image is not built: run images/build-rootfs\n" << found.describe();
    return {};
  }
  std::string path = found.out.substr(at + kKey.size());
  path = path.substr(0, path.find('\n'));
  return path;
}

}  // namespace dsec::test

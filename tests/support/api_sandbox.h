// For end-to-end tests of the VM's API socket: a local working directory, a client of a
// sandbox's API, and the default image as a PUT /boot-source body.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/dsec_vmm.h"
#include "tests/support/sandbox.h"
#include "vmm/api/vm_control.h"
#include "vmm/http/client.h"

namespace dsec::test {

// `name`-<pid> on a local file system: in the test bed /tmp is the host's, over 9p, where a
// clone would read its memory through 9p and no Unix socket can live; /run is a tmpfs there.
inline std::filesystem::path local_dir(const std::string& name) {
  const std::filesystem::path base =
      ::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path();
  return base / (name + "-" + std::to_string(::getpid()));
}

inline http::HttpClient api_of(const Sandbox& vm) {
  return api::vmm_api_client(vm.api_socket(), std::chrono::seconds(120));
}

// The default image with its agent, as the body of PUT /boot-source.
inline nlohmann::json default_image_boot_source() {
  const DefaultImage image = default_image();
  return {{"kernel_image_path", image.vmlinux.string()},
          {"initrd_path", image.initrd.string()},
          {"boot_args", "console=ttyS0 reboot=k panic=-1 dsec.agent"}};
}

}  // namespace dsec::test

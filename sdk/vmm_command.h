// The dsec-vmm command line the library runs for a sandbox: `run` or `restore` with the
// sandbox's sockets and console in its runtime directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dsec/sandbox.h"

namespace dsec::sdk::detail {

// The files of one sandbox's runtime directory.
struct RuntimeFiles {
  std::string vsock;       // the vsock device's Unix socket (the agent behind it)
  std::string api_socket;  // the VMM's API socket
  std::string console;     // the guest's serial console (LaunchOptions::console_path if given)
  std::string vmm_log;     // the VMM's stderr
};

RuntimeFiles runtime_files(const std::filesystem::path& dir, const LaunchOptions& launch);

// Where runtime directories are made: LaunchOptions::runtime_parent, else `xdg_runtime_dir`
// (when not empty), else /tmp.
std::string runtime_parent(const LaunchOptions& launch, const char* xdg_runtime_dir);

// The options the library refuses before it starts anything (ErrorCode::kInvalidArgument).
Status check_launch(const LaunchOptions& launch);
Status check_boot(const BootOptions& options);
Status check_restore(const RestoreOptions& options);
// Whether the sockets' paths fit a sockaddr_un (with room for the vsock device's
// PATH_PORT sockets beside the vsock socket).
Status check_socket_paths(const RuntimeFiles& files);

// The arguments after the binary's name.
std::vector<std::string> boot_arguments(const BootOptions& options, const RuntimeFiles& files);
std::vector<std::string> restore_arguments(const RestoreOptions& options,
                                           const RuntimeFiles& files);

}  // namespace dsec::sdk::detail

#include "sdk/vmm_command.h"

#include <sys/un.h>

namespace dsec::sdk::detail {
namespace {

Error invalid(std::string message, std::string hint = {}) {
  return {ErrorCode::kInvalidArgument, std::move(message), std::move(hint)};
}

// The options every VMM the library starts gets: its sockets, console and seccomp mode.
void add_launch_arguments(const LaunchOptions& launch, const RuntimeFiles& files,
                          std::vector<std::string>& args) {
  args.insert(args.end(), {"--vsock", files.vsock, "--api-sock", files.api_socket, "--console",
                           files.console, "--seccomp", launch.seccomp});
}

// The longest suffix the vsock device adds to its socket's path: "_" and a 32-bit port.
constexpr size_t kVsockPortSuffix = 11;

}  // namespace

RuntimeFiles runtime_files(const std::filesystem::path& dir, const LaunchOptions& launch) {
  return {
      .vsock = dir / "vsock",
      .api_socket = dir / "api.sock",
      .console = launch.console_path.empty() ? (dir / "console.log").string() : launch.console_path,
      .vmm_log = dir / "vmm.log"};
}

std::string runtime_parent(const LaunchOptions& launch, const char* xdg_runtime_dir) {
  if (!launch.runtime_parent.empty()) {
    return launch.runtime_parent;
  }
  if (xdg_runtime_dir != nullptr && *xdg_runtime_dir != '\0') {
    return xdg_runtime_dir;
  }
  return "/tmp";
}

Status check_launch(const LaunchOptions& launch) {
  if (launch.seccomp != "on" && launch.seccomp != "log" && launch.seccomp != "off") {
    return std::unexpected(
        invalid("seccomp mode '" + launch.seccomp + "' is not one we know", "give on, log or off"));
  }
  if (launch.ready_timeout.count() <= 0 || launch.client.answer_timeout.count() <= 0 ||
      launch.client.api_timeout.count() <= 0) {
    return std::unexpected(invalid("timeouts must be positive"));
  }
  return {};
}

Status check_boot(const BootOptions& options) {
  if (options.vcpus == 0 || options.memory_mib == 0) {
    return std::unexpected(invalid("a sandbox needs at least one vCPU and some memory (vcpus " +
                                   std::to_string(options.vcpus) + ", memory_mib " +
                                   std::to_string(options.memory_mib) + ")"));
  }
  if (options.kernel.empty() != options.initrd.empty()) {
    return std::unexpected(
        invalid("give both a kernel and an initrd, or neither", "neither boots the default image"));
  }
  return check_launch(options.launch);
}

Status check_restore(const RestoreOptions& options) {
  if (options.snapshot_dir.empty()) {
    return std::unexpected(invalid("no snapshot directory given"));
  }
  return check_launch(options.launch);
}

Status check_socket_paths(const RuntimeFiles& files) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  for (const auto& [path, extra] :
       {std::pair{&files.vsock, kVsockPortSuffix}, std::pair{&files.api_socket, size_t{0}}}) {
    if (path->size() + extra > kMaxPath) {
      return std::unexpected(invalid("the socket path " + *path +
                                         " is too long for a Unix socket (" +
                                         std::to_string(kMaxPath) + " bytes at most)",
                                     "give LaunchOptions::runtime_parent a shorter directory"));
    }
  }
  return {};
}

std::vector<std::string> boot_arguments(const BootOptions& options, const RuntimeFiles& files) {
  std::vector<std::string> args{"run",
                                "--vcpus",
                                std::to_string(options.vcpus),
                                "--memory",
                                std::to_string(options.memory_mib),
                                "--append",
                                "dsec.agent"};
  if (!options.kernel.empty()) {
    args.insert(args.end(), {"--kernel", options.kernel, "--initrd", options.initrd});
  }
  if (options.rng) {
    args.emplace_back("--rng");
  }
  for (const auto& drive : options.drives) {
    args.insert(args.end(), {"--drive", drive});
  }
  for (const auto& word : options.append) {
    args.insert(args.end(), {"--append", word});
  }
  add_launch_arguments(options.launch, files, args);
  return args;
}

std::vector<std::string> restore_arguments(const RestoreOptions& options,
                                           const RuntimeFiles& files) {
  std::vector<std::string> args{"restore", options.snapshot_dir, "--agent-timeout",
                                std::to_string(options.launch.ready_timeout.count() / 1000.0)};
  add_launch_arguments(options.launch, files, args);
  return args;
}

}  // namespace dsec::sdk::detail

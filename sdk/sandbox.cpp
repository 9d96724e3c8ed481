#include "dsec/sandbox.h"

#include <cstdlib>
#include <functional>

#include "sdk/error_mapping.h"
#include "sdk/host_files.h"
#include "sdk/vmm_binary.h"
#include "sdk/vmm_command.h"
#include "sdk/vmm_process.h"
#include "vmm/agent/readiness.h"
#include "vmm/api/vm_control.h"
#include "vmm/http/client.h"
#include "vmm/image/private_dir.h"

namespace dsec::sdk {

using detail::with_code;

namespace detail {

// A running sandbox's VMM, its runtime directory and a client of both.
struct SandboxState {
  // How long the VMM has to end after SIGTERM when its Sandbox goes, before SIGKILL.
  static constexpr std::chrono::milliseconds kStopGrace{5000};

  SandboxState(image::PrivateDir d, RuntimeFiles f, VmmProcess v, SandboxClient c)
      : dir(std::move(d)), files(std::move(f)), vmm(std::move(v)), client(std::move(c)) {}
  SandboxState(const SandboxState&) = delete;
  SandboxState& operator=(const SandboxState&) = delete;
  SandboxState(SandboxState&&) = delete;
  SandboxState& operator=(SandboxState&&) = delete;
  // Then the members go in reverse: the VMM (killed if it still runs), then the runtime
  // directory with its sockets and files.
  ~SandboxState() { (void)vmm.stop(kStopGrace); }

  image::PrivateDir dir;
  RuntimeFiles files;
  VmmProcess vmm;
  SandboxClient client;
};

}  // namespace detail

namespace {

using detail::SandboxState;

// How long each try of the API's readiness may take.
constexpr std::chrono::milliseconds kApiTryTimeout{1000};
// Pause between two tries, on the VMM's pidfd: it ends early when the VMM does.
constexpr std::chrono::milliseconds kApiRetryPause{10};
// How much of the VMM's log an error quotes.
constexpr size_t kLogLinesInErrors = 20;

Error vmm_ended(const std::string& command, int status, const detail::RuntimeFiles& files) {
  return {ErrorCode::kVmmExited,
          "dsec-vmm " + command + " exited with status " + std::to_string(status) +
              " before the sandbox was ready; its log ends:\n" +
              detail::last_lines(files.vmm_log, kLogLinesInErrors),
          "exit statuses: docs/architecture.md#lifecycle-and-exits"};
}

// Waits until the agent answers and then the API does (a restored clone serves its API
// only once its agent has taken its entropy and clock): the sandbox is ready.
Status wait_until_ready(const std::string& command, SandboxState& sandbox,
                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto ended = [&]() -> Result<std::optional<int>> {
    return with_code(sandbox.vmm.wait_for_exit(std::chrono::milliseconds(0)), ErrorCode::kHost);
  };
  auto agent =
      agent::wait_for_agent(sandbox.files.vsock, timeout, [&] { return sandbox.vmm.running(); });
  if (const auto status = DSEC_TRY(ended())) {
    return std::unexpected(vmm_ended(command, *status, sandbox.files));
  }
  DSEC_TRY(with_code(std::move(agent), ErrorCode::kAgent));
  const http::HttpClient api = api::vmm_api_client(sandbox.files.api_socket, kApiTryTimeout);
  for (;;) {
    auto answer = api.get("/");
    if (answer) {
      return {};
    }
    if (const auto status =
            DSEC_TRY(with_code(sandbox.vmm.wait_for_exit(kApiRetryPause), ErrorCode::kHost))) {
      return std::unexpected(vmm_ended(command, *status, sandbox.files));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::unexpected(
          detail::to_sdk_error(answer.error().with_context("the VMM's API did not answer within " +
                                                           std::to_string(timeout.count()) + " ms"),
                               ErrorCode::kApi));
    }
  }
}

// Starts `dsec-vmm command` with the arguments made for the sandbox's runtime files, and
// waits until the sandbox is ready.
Result<std::unique_ptr<SandboxState>> launch(
    const std::string& command, const LaunchOptions& launch,
    const std::function<std::vector<std::string>(const detail::RuntimeFiles&)>& arguments) {
  const auto binary = DSEC_TRY(with_code(
      detail::find_vmm_binary(detail::vmm_binary_search(launch.vmm_binary)), ErrorCode::kNotFound));
  const auto parent = detail::runtime_parent(launch, std::getenv("XDG_RUNTIME_DIR"));
  auto dir =
      DSEC_TRY(with_code(image::PrivateDir::create(parent, "dsec-sandbox"), ErrorCode::kHost));
  auto files = detail::runtime_files(dir.path(), launch);
  DSEC_TRY(detail::check_socket_paths(files));
  auto vmm = DSEC_TRY(with_code(detail::VmmProcess::spawn(binary, arguments(files), files.vmm_log),
                                ErrorCode::kHost));
  SandboxClient client({.vsock_path = files.vsock, .api_socket_path = files.api_socket},
                       launch.client);
  auto state = std::make_unique<SandboxState>(std::move(dir), std::move(files), std::move(vmm),
                                              std::move(client));
  // On failure the state goes: the VMM is stopped and the directory removed.
  DSEC_TRY(wait_until_ready(command, *state, launch.ready_timeout));
  return state;
}

}  // namespace

Result<Sandbox> Sandbox::boot(const BootOptions& options) {
  DSEC_TRY(detail::check_boot(options));
  auto state = DSEC_TRY(launch("run", options.launch, [&](const detail::RuntimeFiles& files) {
    return detail::boot_arguments(options, files);
  }));
  return Sandbox(std::move(state));
}

Result<Sandbox> Sandbox::restore(const RestoreOptions& options) {
  DSEC_TRY(detail::check_restore(options));
  auto state = DSEC_TRY(launch("restore", options.launch, [&](const detail::RuntimeFiles& files) {
    return detail::restore_arguments(options, files);
  }));
  return Sandbox(std::move(state));
}

Sandbox::Sandbox(std::unique_ptr<SandboxState> state) : state_(std::move(state)) {}
Sandbox::Sandbox(Sandbox&&) noexcept = default;
Sandbox& Sandbox::operator=(Sandbox&&) noexcept = default;
Sandbox::~Sandbox() = default;

const SandboxClient& Sandbox::client() const {
  return state_->client;
}

Result<int> Sandbox::stop(std::chrono::milliseconds grace) {
  return with_code(state_->vmm.stop(grace), ErrorCode::kHost);
}

bool Sandbox::running() const {
  return state_->vmm.running();
}

pid_t Sandbox::vmm_pid() const {
  return state_->vmm.pid();
}

const std::string& Sandbox::runtime_dir() const {
  return state_->dir.path().native();
}

std::string Sandbox::vmm_log_tail(size_t max_lines) const {
  return detail::last_lines(state_->files.vmm_log, max_lines);
}

}  // namespace dsec::sdk

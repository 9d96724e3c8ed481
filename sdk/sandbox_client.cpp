#include "dsec/sandbox_client.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "sdk/agent_conversions.h"
#include "sdk/error_mapping.h"
#include "sdk/host_files.h"
#include "vmm/agent/client.h"
#include "vmm/agent/file_copy.h"
#include "vmm/api/vm_control.h"
#include "vmm/http/client.h"

namespace dsec::sdk {
namespace {

using detail::as_text;
using detail::exit_status_of;
using detail::with_code;

agent::ExecRequest agent_request(const ExecRequest& request) {
  return {.argv = request.argv,
          .env = request.env,
          .cwd = request.cwd,
          .timeout_ms = static_cast<uint32_t>(request.timeout.count()),
          .stdin_open = request.stdin_open};
}

std::span<const uint8_t> stdin_bytes(const ExecRequest& request) {
  return detail::as_bytes(request.stdin_data);
}

// A client of the VMM's API socket, which a pool's sandbox's client is not given.
Result<http::HttpClient> api_client(const SandboxEndpoints& endpoints,
                                    const ClientOptions& options) {
  if (endpoints.api_socket_path.empty()) {
    return std::unexpected(
        Error(ErrorCode::kInvalidArgument,
              "this sandbox's client has no API socket (a pool's sandbox's has none)",
              "pause, resume and snapshot need its VMM's --api-sock; a pool's "
              "sandbox is paused through its PoolClient"));
  }
  return api::vmm_api_client(endpoints.api_socket_path, options.api_timeout);
}

Status check_request(const ExecRequest& request) {
  if (request.argv.empty()) {
    return std::unexpected(Error(ErrorCode::kInvalidArgument, "exec needs a command"));
  }
  if (request.timeout.count() < 0 ||
      request.timeout.count() > std::numeric_limits<uint32_t>::max()) {
    return std::unexpected(
        Error(ErrorCode::kInvalidArgument,
              "exec timeout out of range: " + std::to_string(request.timeout.count()) + " ms",
              "give 0 (none) up to 2^32-1 ms"));
  }
  return {};
}

}  // namespace

SandboxClient::SandboxClient(SandboxEndpoints endpoints, ClientOptions options)
    : endpoints_(std::move(endpoints)), options_(options) {}

Result<ExecResult> SandboxClient::exec(const ExecRequest& request, size_t max_output_bytes) const {
  DSEC_TRY(check_request(request));
  ExecResult result;
  bool over_limit = false;
  const auto collect = [&](std::string& into) {
    return [&into, &result, &over_limit,
            max_output_bytes](std::span<const uint8_t> bytes) -> dsec::Status {
      if (result.stdout_data.size() + result.stderr_data.size() + bytes.size() > max_output_bytes) {
        over_limit = true;
        return fail(
            "the command wrote more than " + std::to_string(max_output_bytes) + " bytes of output",
            "raise the limit, or take the output as it comes (exec with sinks)");
      }
      into.append(as_text(bytes));
      return ok();
    };
  };
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  auto status = client.exec(agent_request(request), collect(result.stdout_data),
                            collect(result.stderr_data), stdin_bytes(request));
  if (!status) {
    return std::unexpected(detail::to_sdk_error(
        status.error(), over_limit ? ErrorCode::kOutputLimit : ErrorCode::kAgent));
  }
  result.status = exit_status_of(*status);
  return result;
}

Result<ExitStatus> SandboxClient::exec(const ExecRequest& request, const OutputSink& on_stdout,
                                       const OutputSink& on_stderr) const {
  DSEC_TRY(check_request(request));
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  const auto status =
      DSEC_TRY(with_code(client.exec(agent_request(request), detail::sink_of(on_stdout),
                                     detail::sink_of(on_stderr), stdin_bytes(request)),
                         ErrorCode::kAgent));
  return exit_status_of(status);
}

Status SandboxClient::copy_in(const std::string& host_path, const std::string& guest_path) const {
  struct stat st {};
  if (::stat(host_path.c_str(), &st) != 0) {
    return std::unexpected(Error(
        ErrorCode::kNotFound,
        "cannot copy " + host_path + " into the sandbox: " + std::strerror(errno), {}, errno));
  }
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  return with_code(agent::copy_into_guest(client, host_path, guest_path), ErrorCode::kAgent);
}

Result<uint64_t> SandboxClient::copy_out(const std::string& guest_path,
                                         const std::string& host_path) const {
  const mode_t umask = DSEC_TRY(with_code(detail::process_umask(), ErrorCode::kHost));
  auto client = agent::vsock_uds_client(endpoints_.vsock_path, options_.answer_timeout);
  const auto info = DSEC_TRY(
      with_code(agent::copy_out_of_guest(client, guest_path, host_path, umask), ErrorCode::kAgent));
  return info.size;
}

Status SandboxClient::pause() const {
  return with_code(api::pause_vm(DSEC_TRY(api_client(endpoints_, options_))), ErrorCode::kApi);
}

Status SandboxClient::resume() const {
  return with_code(api::resume_vm(DSEC_TRY(api_client(endpoints_, options_))), ErrorCode::kApi);
}

Status SandboxClient::snapshot(const std::string& dir, bool stay_paused) const {
  const auto client = DSEC_TRY(api_client(endpoints_, options_));
  DSEC_TRY(with_code(api::create_snapshot(client, dir, !stay_paused), ErrorCode::kApi));
  return {};
}

}  // namespace dsec::sdk

#include "vmm/e2b/envd_service.h"

#include <cstring>

#include "vmm/agent/connection_cutter.h"
#include "vmm/e2b/base64.h"

namespace dsec::e2b {

// The agent speaks its failures as text (docs/agent-protocol.md: an error frame's message);
// what it says of a path comes from strerror and of a pid from its process table.
ConnectError agent_failure(const Error& e) {
  const std::string message = e.message();
  const auto says = [&](const char* text) { return message.find(text) != std::string::npos; };
  ConnectCode code = ConnectCode::kInternal;
  if (says(std::strerror(ENOENT)) || says("no process ")) {
    code = ConnectCode::kNotFound;
  } else if (says(std::strerror(EEXIST))) {
    code = ConnectCode::kAlreadyExists;
  } else if (says(std::strerror(EACCES)) || says(std::strerror(EPERM))) {
    code = ConnectCode::kPermissionDenied;
  } else if (says(std::strerror(ENOTDIR)) || says(std::strerror(EISDIR))) {
    code = ConnectCode::kInvalidArgument;
  }
  return ConnectError{.code = code, .message = message};
}

ConnectError client_gone() {
  return ConnectError{.code = ConnectCode::kCanceled, .message = "the client went away"};
}

agent::AgentClient agent_for_client(const std::string& vsock,
                                    const std::shared_ptr<http::ClientPresence>& client) {
  auto cutter = std::make_shared<agent::ConnectionCutter>();
  if (client) {
    client->on_gone(agent::ConnectionCutter::stopper(cutter));
  }
  return agent::AgentClient(agent::cuttable_vsock_uds(vsock, std::move(cutter)));
}

ConnectResult<std::string> basic_user(std::string_view authorization) {
  if (authorization.empty()) {
    return std::string();
  }
  constexpr std::string_view kScheme = "Basic ";
  if (!authorization.starts_with(kScheme)) {
    return connect_error(ConnectCode::kUnauthenticated,
                         "the Authorization header must be Basic, naming the user (\"user:\")");
  }
  auto decoded = base64_decode(authorization.substr(kScheme.size()));
  if (!decoded) {
    return connect_error(ConnectCode::kUnauthenticated,
                         "the Authorization header's Basic credentials are not base64");
  }
  std::string user = decoded->substr(0, decoded->find(':'));
  if (user.size() > agent::kMaxUserLen) {
    return connect_error(ConnectCode::kInvalidArgument, "the user's name is too long");
  }
  return user;
}

ConnectResult<std::string> string_field(const nlohmann::json& request, std::string_view name) {
  const auto it = request.find(name);
  if (it == request.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'" + std::string(name) + "' must be a string");
  }
  return it->get<std::string>();
}

}  // namespace dsec::e2b

// What envd's Connect methods share (envd_process_service.h, envd_fs_service.h): who calls
// (its user, the sandbox's environment, whether its client is still there), how a server
// stream sends its messages, a table entry per method, and how an agent's failure reads as
// a Connect error.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/agent/client.h"
#include "vmm/common/error.h"
#include "vmm/e2b/connect_codec.h"
#include "vmm/http/message.h"

namespace dsec::e2b {

struct EnvdCaller {
  std::string user;              // from Authorization: Basic; empty: the agent's own
  std::vector<std::string> env;  // the sandbox's envVars, "NAME=value"
  std::shared_ptr<http::ClientPresence> client;  // gone: a stream stops
};

// Sends a server stream's next message to its client as it comes, waiting while the client
// has not read what came before; false when the client went away (the work then stops).
using Emit = std::function<bool(const nlohmann::json& message)>;

// One of envd's methods: its path ("/process.Process/List"), and its work against the
// sandbox's agent, on a thread of its own; a unary one answers one message, a stream emits
// its messages and says how it ended (nullopt: well; the end-stream frame carries it).
using UnaryWork = std::function<ConnectResult<nlohmann::json>(
    agent::AgentClient&, const nlohmann::json& request, const EnvdCaller&)>;
using StreamWork = std::function<std::optional<ConnectError>(
    agent::AgentClient&, const nlohmann::json& request, const EnvdCaller&, const Emit&)>;
struct EnvdMethod {
  std::string_view path;
  UnaryWork unary;    // set for a unary method
  StreamWork stream;  // set for a server stream
  // A stream's message that says it lives, sent when it was quiet for a while.
  nlohmann::json keepalive;
};

// An agent's failure as a Connect error: what the guest said no such file or process to is
// not_found, a file that exists already_exists, a permission it lacks permission_denied,
// anything else internal (the agent's own message kept).
ConnectError agent_failure(const Error& e);

// The user an Authorization: Basic header names ("user:" base64-encoded); "" without one.
ConnectResult<std::string> basic_user(std::string_view authorization);

// A stream's end when its client went away: canceled.
ConnectError client_gone();

// A client of the agent behind `vsock` for work done for `client` alone: its connections
// are shut as soon as the client is gone, so that a wait on a quiet guest ends then.
agent::AgentClient agent_for_client(const std::string& vsock,
                                    const std::shared_ptr<http::ClientPresence>& client);

// Whether `value` is a whole number of 0 or more (a parsed one is unsigned, one built in
// code may be signed).
inline bool is_count(const nlohmann::json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

// A field of `request` that must be a string when present ("" when absent).
ConnectResult<std::string> string_field(const nlohmann::json& request, std::string_view name);

}  // namespace dsec::e2b

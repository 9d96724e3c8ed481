// What envd's Connect methods share (envd_process_service.h, envd_fs_service.h): who calls
// (its user, the sandbox's environment, whether its client is still there), the answer of a
// server stream whose messages are collected before it is sent, a table entry per method,
// and how an agent's failure reads as a Connect error.
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
  std::shared_ptr<http::ClientPresence> client;  // gone: a stream stops collecting
};

// A server stream's messages and how it ended.
struct StreamOutcome {
  std::vector<nlohmann::json> messages;
  std::optional<ConnectError> error;
};

// One of envd's methods: its path ("/process.Process/List"), and its work against the
// sandbox's agent, on a thread of its own; a unary one answers one message, a stream many.
using UnaryWork = std::function<ConnectResult<nlohmann::json>(
    agent::AgentClient&, const nlohmann::json& request, const EnvdCaller&)>;
using StreamWork = std::function<StreamOutcome(agent::AgentClient&, const nlohmann::json& request,
                                               const EnvdCaller&)>;
struct EnvdMethod {
  std::string_view path;
  UnaryWork unary;    // set for a unary method
  StreamWork stream;  // set for a server stream
};

// An agent's failure as a Connect error: what the guest said no such file or process to is
// not_found, a file that exists already_exists, a permission it lacks permission_denied,
// anything else internal (the agent's own message kept).
ConnectError agent_failure(const Error& e);

// The user an Authorization: Basic header names ("user:" base64-encoded); "" without one.
ConnectResult<std::string> basic_user(std::string_view authorization);

// Whether `value` is a whole number of 0 or more (a parsed one is unsigned, one built in
// code may be signed).
inline bool is_count(const nlohmann::json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

// A field of `request` that must be a string when present ("" when absent).
ConnectResult<std::string> string_field(const nlohmann::json& request, std::string_view name);

}  // namespace dsec::e2b

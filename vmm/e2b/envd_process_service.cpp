#include "vmm/e2b/envd_process_service.h"

#include <fmt/format.h>

#include <csignal>

#include "vmm/e2b/base64.h"

namespace dsec::e2b {
namespace {

using nlohmann::json;

// The pid a ProcessSelector names: its pid, or the kept process with its tag; not_found
// when the agent keeps no such process.
ConnectResult<uint32_t> selected_pid(agent::AgentClient& agent, const json& request) {
  const auto selector = request.find("process");
  if (selector == request.end() || !selector->is_object()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'process' must select a process: {\"pid\": N} or {\"tag\": T}");
  }
  const auto pid = selector->find("pid");
  const auto tag = selector->find("tag");
  if ((pid == selector->end()) == (tag == selector->end()) ||
      (pid != selector->end() && !is_count(*pid)) ||
      (tag != selector->end() && !tag->is_string())) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'process' must hold a pid (a number) or a tag (a string), one of them");
  }
  auto listed = agent.list_processes();
  if (!listed) {
    return std::unexpected(agent_failure(listed.error()));
  }
  for (const agent::ProcessEntry& p : listed->processes) {
    const bool same = pid != selector->end() ? p.pid == pid->get<uint64_t>()
                                             : p.tag == tag->get_ref<const std::string&>();
    if (same && p.running) {
      return p.pid;
    }
  }
  return connect_error(ConnectCode::kNotFound,
                       pid != selector->end()
                           ? fmt::format("no process {} runs in the sandbox", pid->get<uint64_t>())
                           : "no process with tag '" + tag->get<std::string>().substr(0, 256) +
                                 "' runs in the sandbox");
}

json event(json inner) {
  return {{"event", std::move(inner)}};
}

// The end event of an exit status, as envd's (Go's ProcessState) words it.
json end_event(const agent::ExitStatus& status) {
  json end = {{"exited", status.kind == agent::ExitStatus::Kind::kExited}};
  if (status.kind == agent::ExitStatus::Kind::kExited) {
    end["exitCode"] = status.code;
    end["status"] = fmt::format("exit status {}", status.code);
  } else {
    end["exitCode"] = -1;
    end["status"] = fmt::format("signal: {}", strsignal(status.code));
  }
  return event({{"end", end}});
}

// Attaches to `pid` and emits its output as data events as it comes, then its end.
std::optional<ConnectError> follow(agent::AgentClient& agent, uint32_t pid, bool pty,
                                   const EnvdCaller& caller, const Emit& emit) {
  bool left = false;  // an emit found the client gone
  const auto gone = [&] { return left || (caller.client && caller.client->gone()); };
  if (!emit(event({{"start", {{"pid", pid}}}}))) {
    return client_gone();
  }
  const auto sink = [&](const char* field) {
    return [&, field](std::span<const uint8_t> bytes) -> Status {
      const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      if (!emit(event({{"data", {{field, base64_encode(text)}}}}))) {
        left = true;
        return fail("the client went away");  // the process runs on, kept by the agent
      }
      return ok();
    };
  };
  auto exit = agent.attach_process(pid, sink(pty ? "pty" : "stdout"), sink(pty ? "pty" : "stderr"));
  if (!exit) {
    return gone() ? client_gone() : agent_failure(exit.error());
  }
  if (!emit(end_event(*exit))) {
    return client_gone();
  }
  return std::nullopt;
}

std::optional<ConnectError> start(agent::AgentClient& agent, const json& request,
                                  const EnvdCaller& caller, const Emit& emit) {
  auto req = start_request(request, caller);
  if (!req) {
    return req.error();
  }
  auto pid = agent.start_process(*req);
  if (!pid) {
    return agent_failure(pid.error());
  }
  return follow(agent, *pid, req->pty, caller, emit);
}

std::optional<ConnectError> connect(agent::AgentClient& agent, const json& request,
                                    const EnvdCaller& caller, const Emit& emit) {
  auto pid = selected_pid(agent, request);
  if (!pid) {
    return pid.error();
  }
  auto listed = agent.list_processes();
  bool pty = false;
  if (listed) {
    for (const auto& p : listed->processes) {
      pty = pty || (p.pid == *pid && p.pty);
    }
  }
  return follow(agent, *pid, pty, caller, emit);
}

ConnectResult<json> list(agent::AgentClient& agent, const json&, const EnvdCaller&) {
  auto listed = agent.list_processes();
  if (!listed) {
    return std::unexpected(agent_failure(listed.error()));
  }
  json processes = json::array();
  for (const agent::ProcessEntry& p : listed->processes) {
    if (!p.running) {
      continue;
    }
    json config = {
        {"cmd", p.argv.empty() ? "" : p.argv[0]},
        {"args", p.argv.empty() ? std::vector<std::string>{}
                                : std::vector<std::string>(p.argv.begin() + 1, p.argv.end())},
        {"envs", json::object()}};
    json info = {{"config", config}, {"pid", p.pid}};
    if (!p.tag.empty()) {
      info["tag"] = p.tag;
    }
    processes.push_back(std::move(info));
  }
  return json{{"processes", processes}};
}

ConnectResult<json> send_input(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const uint32_t pid = DSEC_TRY(selected_pid(agent, request));
  const auto input = request.find("input");
  if (input == request.end() || !input->is_object()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'input' must be {\"stdin\": BASE64} or {\"pty\": BASE64}");
  }
  const auto data = input->contains("stdin") ? input->find("stdin") : input->find("pty");
  if (data == input->end() || !data->is_string()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'input' must be {\"stdin\": BASE64} or {\"pty\": BASE64}");
  }
  auto bytes = base64_decode(data->get_ref<const std::string&>());
  if (!bytes) {
    return connect_error(ConnectCode::kInvalidArgument, "the input is not base64");
  }
  const std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes->data()),
                                      bytes->size());
  if (auto sent = agent.send_process_input(pid, span); !sent) {
    return std::unexpected(agent_failure(sent.error()));
  }
  return json::object();
}

ConnectResult<json> close_stdin(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const uint32_t pid = DSEC_TRY(selected_pid(agent, request));
  if (auto closed = agent.close_process_stdin(pid); !closed) {
    return std::unexpected(agent_failure(closed.error()));
  }
  return json::object();
}

ConnectResult<json> send_signal(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const auto signal = request.find("signal");
  int number = 0;
  if (signal != request.end() && signal->is_string()) {
    const auto& name = signal->get_ref<const std::string&>();
    number = name == "SIGNAL_SIGKILL" ? SIGKILL : name == "SIGNAL_SIGTERM" ? SIGTERM : 0;
  } else if (signal != request.end() && is_count(*signal)) {
    const auto value = signal->get<uint64_t>();
    number = value == SIGKILL || value == SIGTERM ? static_cast<int>(value) : 0;
  }
  if (number == 0) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'signal' must be SIGNAL_SIGTERM or SIGNAL_SIGKILL");
  }
  const uint32_t pid = DSEC_TRY(selected_pid(agent, request));
  if (auto sent = agent.signal_process(pid, number); !sent) {
    return std::unexpected(agent_failure(sent.error()));
  }
  return json::object();
}

ConnectResult<json> update(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const uint32_t pid = DSEC_TRY(selected_pid(agent, request));
  const json size = request.value("pty", json::object()).value("size", json());
  if (!size.is_object() || !is_count(size.value("rows", json())) ||
      !is_count(size.value("cols", json()))) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'pty' must be {\"size\": {\"rows\": N, \"cols\": N}}");
  }
  const auto rows = size["rows"].get<uint64_t>();
  const auto cols = size["cols"].get<uint64_t>();
  if (rows == 0 || cols == 0 || rows > agent::kMaxTerminalSide || cols > agent::kMaxTerminalSide) {
    return connect_error(
        ConnectCode::kInvalidArgument,
        fmt::format("a terminal's rows and cols are 1 to {}", agent::kMaxTerminalSide));
  }
  if (auto resized = agent.resize_process_terminal(pid, static_cast<uint16_t>(rows),
                                                   static_cast<uint16_t>(cols));
      !resized) {
    return std::unexpected(agent_failure(resized.error()));
  }
  return json::object();
}

}  // namespace

ConnectResult<agent::ProcessStartRequest> start_request(const json& request,
                                                        const EnvdCaller& caller) {
  const auto process = request.find("process");
  if (process == request.end() || !process->is_object()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'process' must be {\"cmd\": ..., \"args\": [...], \"envs\": {...}}");
  }
  agent::ProcessStartRequest req;
  const std::string cmd = DSEC_TRY(string_field(*process, "cmd"));
  if (cmd.empty()) {
    return connect_error(ConnectCode::kInvalidArgument, "'process.cmd' names no program");
  }
  req.argv.push_back(cmd);
  const json args = process->value("args", json::array());
  const json envs = process->value("envs", json::object());
  if (!args.is_array() || !envs.is_object()) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'process.args' must be a list of strings, 'process.envs' an object");
  }
  for (const json& arg : args) {
    if (!arg.is_string()) {
      return connect_error(ConnectCode::kInvalidArgument, "'process.args' must hold strings");
    }
    req.argv.push_back(arg.get<std::string>());
  }
  req.env = caller.env;
  for (const auto& [name, value] : envs.items()) {
    if (!value.is_string() || name.empty() || name.find('=') != std::string::npos) {
      return connect_error(ConnectCode::kInvalidArgument,
                           "'process.envs' must map names (without '=') to strings");
    }
    req.env.push_back(name + "=" + value.get<std::string>());
  }
  req.cwd = DSEC_TRY(string_field(*process, "cwd"));
  req.tag = DSEC_TRY(string_field(request, "tag"));
  req.user = caller.user;
  req.stdin_open =
      request.value("stdin", json(false)).is_boolean() && request.value("stdin", false);
  if (const auto pty = request.find("pty"); pty != request.end() && pty->is_object()) {
    req.pty = true;
    const json size = pty->value("size", json::object());
    if (size.is_object() && is_count(size.value("rows", json())) &&
        is_count(size.value("cols", json()))) {
      req.rows = static_cast<uint16_t>(
          std::clamp<uint64_t>(size["rows"].get<uint64_t>(), 1, agent::kMaxTerminalSide));
      req.cols = static_cast<uint16_t>(
          std::clamp<uint64_t>(size["cols"].get<uint64_t>(), 1, agent::kMaxTerminalSide));
    }
    req.stdin_open = true;  // a terminal's input is its keyboard
  }
  return req;
}

std::vector<EnvdMethod> process_methods() {
  return {
      {.path = "/process.Process/Start",
       .unary = {},
       .stream = start,
       .keepalive = event({{"keepalive", json::object()}})},
      {.path = "/process.Process/Connect",
       .unary = {},
       .stream = connect,
       .keepalive = event({{"keepalive", json::object()}})},
      {.path = "/process.Process/List", .unary = list, .stream = {}, .keepalive = {}},
      {.path = "/process.Process/SendInput", .unary = send_input, .stream = {}, .keepalive = {}},
      {.path = "/process.Process/CloseStdin", .unary = close_stdin, .stream = {}, .keepalive = {}},
      {.path = "/process.Process/SendSignal", .unary = send_signal, .stream = {}, .keepalive = {}},
      {.path = "/process.Process/Update", .unary = update, .stream = {}, .keepalive = {}},
  };
}

}  // namespace dsec::e2b

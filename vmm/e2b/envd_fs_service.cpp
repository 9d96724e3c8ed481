#include "vmm/e2b/envd_fs_service.h"

#include <fmt/format.h>

#include <ctime>

namespace dsec::e2b {
namespace {

using nlohmann::json;

// A path from the request: absolute (the agent takes no other).
ConnectResult<std::string> path_field(const json& request, std::string_view name) {
  auto path = string_field(request, name);
  if (path && (path->empty() || path->front() != '/')) {
    return connect_error(ConnectCode::kInvalidArgument,
                         "'" + std::string(name) + "' must be an absolute path");
  }
  return path;
}

std::string permissions(const agent::FsEntry& e) {
  std::string text(1, e.type == agent::FsEntry::Type::kDirectory ? 'd'
                      : e.type == agent::FsEntry::Type::kSymlink ? 'L'
                                                                 : '-');
  constexpr std::string_view kBits = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    text.push_back((e.mode & (0400U >> i)) != 0 ? kBits[i] : '-');
  }
  return text;
}

std::string rfc3339(int64_t ns) {
  const time_t seconds = ns / 1'000'000'000;
  tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     ns % 1'000'000'000);
}

// {"entry": EntryInfo} of `path`, as Stat, MakeDir and Move answer.
ConnectResult<json> entry_of(agent::AgentClient& agent, const std::string& path) {
  auto entry = agent.stat(path);
  if (!entry) {
    return std::unexpected(agent_failure(entry.error()));
  }
  return json{{"entry", entry_info(*entry)}};
}

ConnectResult<json> stat(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const std::string path = DSEC_TRY(path_field(request, "path"));
  return entry_of(agent, path);
}

ConnectResult<json> list_dir(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const std::string path = DSEC_TRY(path_field(request, "path"));
  uint64_t depth = 1;
  if (const auto d = request.find("depth"); d != request.end() && !d->is_null()) {
    if (!is_count(*d) || d->get<uint64_t>() > agent::kMaxListDepth) {
      return connect_error(ConnectCode::kInvalidArgument,
                           fmt::format("'depth' must be 1 to {}", agent::kMaxListDepth));
    }
    depth = std::max<uint64_t>(d->get<uint64_t>(), 1);
  }
  auto entries = agent.list_directory(path, static_cast<uint32_t>(depth));
  if (!entries) {
    return std::unexpected(agent_failure(entries.error()));
  }
  json list = json::array();
  for (const agent::FsEntry& e : *entries) {
    list.push_back(entry_info(e));
  }
  return json{{"entries", list}};
}

ConnectResult<json> make_dir(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const std::string path = DSEC_TRY(path_field(request, "path"));
  auto made = agent.make_directory(path);
  if (!made) {
    return std::unexpected(agent_failure(made.error()));
  }
  if (!*made) {
    return connect_error(ConnectCode::kAlreadyExists, "directory " + path + " exists already");
  }
  return entry_of(agent, path);
}

ConnectResult<json> move(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const std::string source = DSEC_TRY(path_field(request, "source"));
  const std::string destination = DSEC_TRY(path_field(request, "destination"));
  if (auto moved = agent.move_path(source, destination); !moved) {
    return std::unexpected(agent_failure(moved.error()));
  }
  return entry_of(agent, destination);
}

ConnectResult<json> remove(agent::AgentClient& agent, const json& request, const EnvdCaller&) {
  const std::string path = DSEC_TRY(path_field(request, "path"));
  if (auto removed = agent.remove_path(path); !removed) {
    return std::unexpected(agent_failure(removed.error()));
  }
  return json::object();
}

// envd's EventType of an agent's event.
std::string_view event_type(agent::FsEvent::Kind kind) {
  switch (kind) {
    case agent::FsEvent::Kind::kCreated:
      return "EVENT_TYPE_CREATE";
    case agent::FsEvent::Kind::kWritten:
      return "EVENT_TYPE_WRITE";
    case agent::FsEvent::Kind::kRemoved:
      return "EVENT_TYPE_REMOVE";
    case agent::FsEvent::Kind::kRenamed:
      return "EVENT_TYPE_RENAME";
    case agent::FsEvent::Kind::kChmod:
      return "EVENT_TYPE_CHMOD";
  }
  return "EVENT_TYPE_UNSPECIFIED";
}

// WatchDir: a start event once the watch is set, then each change as it comes, named as
// envd names it, relative to the watched directory; until the client goes away.
std::optional<ConnectError> watch_dir(agent::AgentClient& agent, const json& request,
                                      const EnvdCaller& caller, const Emit& emit) {
  auto path = path_field(request, "path");
  if (!path) {
    return path.error();
  }
  const json recursive = request.value("recursive", json(false));
  auto watch = agent.watch_directory(*path, recursive.is_boolean() && recursive.get<bool>());
  if (!watch) {
    return agent_failure(watch.error());
  }
  if (!emit({{"start", json::object()}})) {
    return client_gone();
  }
  const std::string prefix = path->ends_with('/') ? *path : *path + "/";
  while (!caller.client || !caller.client->gone()) {
    // The client's leaving shuts the watch's connection: this wait ends then.
    auto event = watch->next(std::chrono::seconds(1));
    if (!event) {
      return caller.client && caller.client->gone() ? client_gone() : agent_failure(event.error());
    }
    const std::optional<agent::FsEvent>& change = *event;
    if (!change.has_value()) {
      continue;
    }
    const std::string& changed = change->path;
    const std::string name = changed.starts_with(prefix) ? changed.substr(prefix.size()) : changed;
    if (!emit({{"filesystem", {{"name", name}, {"type", event_type(change->kind)}}}})) {
      break;
    }
  }
  return client_gone();
}

}  // namespace

json entry_info(const agent::FsEntry& e) {
  const size_t slash = e.path.rfind('/');
  json info = {{"name", slash == std::string::npos ? e.path : e.path.substr(slash + 1)},
               {"type", e.type == agent::FsEntry::Type::kDirectory ? "FILE_TYPE_DIRECTORY"
                        : e.type == agent::FsEntry::Type::kSymlink ? "FILE_TYPE_SYMLINK"
                        : e.type == agent::FsEntry::Type::kFile    ? "FILE_TYPE_FILE"
                                                                   : "FILE_TYPE_UNSPECIFIED"},
               {"path", e.path},
               {"size", std::to_string(e.size)},  // int64: a string in protobuf's JSON
               {"mode", e.mode},
               {"permissions", permissions(e)},
               {"owner", e.owner},
               {"group", e.group},
               {"modifiedTime", rfc3339(e.mtime_ns)}};
  if (e.type == agent::FsEntry::Type::kSymlink) {
    info["symlinkTarget"] = e.symlink_target;
  }
  return info;
}

std::vector<EnvdMethod> fs_methods() {
  return {
      {.path = "/filesystem.Filesystem/Stat", .unary = stat, .stream = {}, .keepalive = {}},
      {.path = "/filesystem.Filesystem/ListDir", .unary = list_dir, .stream = {}, .keepalive = {}},
      {.path = "/filesystem.Filesystem/MakeDir", .unary = make_dir, .stream = {}, .keepalive = {}},
      {.path = "/filesystem.Filesystem/Move", .unary = move, .stream = {}, .keepalive = {}},
      {.path = "/filesystem.Filesystem/Remove", .unary = remove, .stream = {}, .keepalive = {}},
      {.path = "/filesystem.Filesystem/WatchDir",
       .unary = {},
       .stream = watch_dir,
       .keepalive = json{{"keepalive", json::object()}}},
  };
}

}  // namespace dsec::e2b

#include "vmm/pool/state_records.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "vmm/common/atomic_file.h"
#include "vmm/common/json_object.h"
#include "vmm/network/network_json.h"

namespace dsec::pool {
namespace {

constexpr size_t kMaxStateFileBytes = size_t{1} << 20;

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return fail_errno("cannot make the state directory " + path, errno);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return fail(path + " is not a directory", "choose another --state-dir");
  }
  return ok();
}

Status write_whole(const std::string& path, const std::string& text) {
  auto writer = DSEC_TRY(AtomicFileWriter::create(path));
  DSEC_TRY(
      writer.write_at(0, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
  return writer.commit();
}

Result<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail_errno("cannot read " + path, errno);
  }
  std::string text(kMaxStateFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxStateFileBytes) {
    return fail(path + " is larger than a state file can be");
  }
  return text;
}

}  // namespace

Result<SandboxState> state_of(std::string_view name) {
  for (auto state : {SandboxState::kStarting, SandboxState::kReady, SandboxState::kInUse,
                     SandboxState::kStopping}) {
    if (state_name(state) == name) {
      return state;
    }
  }
  return fail("unknown sandbox state \"" + std::string(name) + "\"");
}

std::string_view state_name(SandboxState state) {
  switch (state) {
    case SandboxState::kStarting:
      return "starting";
    case SandboxState::kReady:
      return "ready";
    case SandboxState::kInUse:
      return "in_use";
    case SandboxState::kStopping:
      return "stopping";
  }
  return "?";
}

std::string record_text(const SandboxRecord& record) {
  nlohmann::json value = {{"id", record.id},
                          {"image", record.image},
                          {"pid", record.process.pid},
                          {"start_time", record.process.start_time},
                          {"vsock", record.files.vsock},
                          {"log", record.files.log},
                          {"api", record.files.api},
                          {"paused", record.paused},
                          {"state", state_name(record.state)},
                          {"expires_at_ms", record.expires_at_ms},
                          {"idle_timeout_ms", record.idle_timeout_ms}};
  if (!record.owner.empty()) {
    value["owner"] = record.owner;
  }
  if (record.network_slot) {
    value["network_slot"] = *record.network_slot;
    value["egress"] = network::egress_json(record.egress);
  }
  if (!record.ports.empty()) {
    auto& ports = value["ports"] = nlohmann::json::array();
    for (const ForwardedPort& port : record.ports) {
      ports.push_back({{"guest_port", port.guest_port}, {"host_port", port.host_port}});
    }
  }
  return value.dump() + "\n";
}

Result<SandboxRecord> parse_record(std::string_view text) {
  auto object = DSEC_TRY(JsonObject::parse(text, "the record"));
  SandboxRecord record;
  record.id = DSEC_TRY(object.string("id"));
  DSEC_TRY(check_name(record.id, "a sandbox's id"));
  record.image = DSEC_TRY(object.string("image"));
  const uint32_t pid = DSEC_TRY(object.unsigned_int32("pid"));
  if (pid == 0 || pid > INT32_MAX) {
    return fail("the record's pid " + std::to_string(pid) + " is no process's");
  }
  record.process.pid = static_cast<pid_t>(pid);
  record.process.start_time = DSEC_TRY(object.unsigned_int("start_time"));
  record.files.vsock = DSEC_TRY(object.string("vsock"));
  record.files.log = DSEC_TRY(object.string("log"));
  // Optional: a record of a daemon whose clones had no API socket still adopts.
  record.files.api = DSEC_TRY(object.optional_string("api")).value_or("");
  record.paused = DSEC_TRY(object.optional_boolean("paused")).value_or(false);
  // Optional: a record of a daemon before tenants held no owner; the operator sees it.
  record.owner = DSEC_TRY(object.optional_string("owner")).value_or("");
  record.state = DSEC_TRY(state_of(DSEC_TRY(object.string("state"))));
  const uint64_t expires = DSEC_TRY(object.unsigned_int("expires_at_ms"));
  if (expires > INT64_MAX) {
    return fail("the record's expires_at_ms is out of range");
  }
  record.expires_at_ms = static_cast<int64_t>(expires);
  // Optional: a record of a daemon that had no idle timeouts still adopts.
  record.idle_timeout_ms = DSEC_TRY(object.optional_unsigned_int("idle_timeout_ms")).value_or(0);
  if (const auto slot = DSEC_TRY(object.optional_unsigned_int("network_slot")); slot) {
    if (*slot > UINT32_MAX) {
      return fail("the record's network_slot is out of range");
    }
    record.network_slot = static_cast<uint32_t>(*slot);
    record.egress = DSEC_TRY(network::parse_egress_json(DSEC_TRY(object.object("egress")),
                                                        network::ReservedAllow::kAllowed));
  }
  if (const auto ports = DSEC_TRY(object.optional_array("ports")); ports) {
    if (ports->size() > kMaxForwardedPorts) {
      return fail("the record forwards more than " + std::to_string(kMaxForwardedPorts) + " ports");
    }
    for (const auto& entry : *ports) {
      auto port = DSEC_TRY(JsonObject::of(entry, "a forwarded port"));
      const uint64_t guest = DSEC_TRY(port.unsigned_int("guest_port"));
      const uint64_t host = DSEC_TRY(port.unsigned_int("host_port"));
      DSEC_TRY(port.finish());
      if (guest == 0 || guest > 65535 || host == 0 || host > 65535) {
        return fail("the record's forwarded port " + std::to_string(guest) + " -> " +
                    std::to_string(host) + " is out of range");
      }
      record.ports.push_back(ForwardedPort{.guest_port = static_cast<uint16_t>(guest),
                                           .host_port = static_cast<uint16_t>(host)});
    }
  }
  DSEC_TRY(object.finish());
  return record;
}

Result<StateDir> StateDir::open(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') {
    dir.pop_back();
  }
  DSEC_TRY(make_dir(dir));
  StateDir state(std::move(dir));
  DSEC_TRY(make_dir(state.sandboxes_dir()));
  return state;
}

SandboxFiles StateDir::files_for(std::string_view id) const {
  const std::string dir = sandbox_dir(id);
  return {.vsock = dir + "/vsock", .log = dir + ".log", .api = dir + "/api"};
}

std::string StateDir::sandbox_dir(std::string_view id) const {
  return sandboxes_dir() + "/" + std::string(id);
}

Status StateDir::write_record(const SandboxRecord& record) const {
  return write_whole(sandboxes_dir() + "/" + record.id + ".json", record_text(record));
}

void StateDir::remove_record(std::string_view id) const {
  ::unlink((sandboxes_dir() + "/" + std::string(id) + ".json").c_str());
}

std::vector<SandboxRecord> StateDir::read_records(std::vector<std::string>& unreadable) const {
  std::vector<SandboxRecord> records;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sandboxes_dir(), ec)) {
    if (entry.path().extension() != ".json") {
      continue;
    }
    const std::string path = entry.path().string();
    auto record = [&]() -> Result<SandboxRecord> {
      auto parsed = DSEC_TRY(parse_record(DSEC_TRY(read_small_file(path))));
      if (entry.path().stem() != parsed.id) {
        return fail("its id \"" + parsed.id + "\" is not its file's name");
      }
      return parsed;
    }();
    if (record) {
      records.push_back(std::move(*record));
    } else {
      unreadable.push_back(path + ": " + record.error().message());
    }
  }
  return records;
}

Status StateDir::write_images(const std::vector<ImageSpec>& images) const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& image : images) {
    list.push_back(image_spec_json(image));
  }
  return write_whole(dir_ + "/images.json", nlohmann::json{{"images", list}}.dump(2) + "\n");
}

Result<std::vector<ImageSpec>> StateDir::read_images() const {
  const std::string path = dir_ + "/images.json";
  if (::access(path.c_str(), F_OK) != 0) {
    return std::vector<ImageSpec>{};
  }
  auto object = DSEC_TRY(JsonObject::parse(DSEC_TRY(read_small_file(path)), path));
  const auto list = DSEC_TRY(object.array("images"));
  DSEC_TRY(object.finish());
  std::vector<ImageSpec> images;
  for (const auto& item : list) {
    auto spec = image_spec_from_json(item);
    if (!spec) {
      return std::unexpected(spec.error().with_context(path));
    }
    images.push_back(std::move(*spec));
  }
  return images;
}

void StateDir::remove_own_files() const {
  ::unlink((dir_ + "/images.json").c_str());
  ::rmdir(sandboxes_dir().c_str());
}

}  // namespace dsec::pool

#include "vmm/jail/cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "vmm/common/unique_fd.h"

namespace dsec::jail {
namespace {

namespace fs = std::filesystem;

Status write_file(const std::string& path, const std::string& value, const std::string& hint) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) {
    return fail_errno("cgroup: open " + path, errno, hint);
  }
  // One write(2): a cgroup file takes its value in one piece.
  const ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n != static_cast<ssize_t>(value.size())) {
    return fail_errno("cgroup: writing '" + value + "' to " + path, n < 0 ? errno : EIO, hint);
  }
  return ok();
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool has_word(const std::string& words, const std::string& word) {
  std::istringstream in(words);
  std::string w;
  while (in >> w) {
    if (w == word) {
      return true;
    }
  }
  return false;
}

// Enables `controllers` for the children of `level`, which must offer them.
Status enable_controllers(const fs::path& level, const std::set<std::string>& controllers) {
  const std::string offered = first_line(level / "cgroup.controllers");
  for (const auto& controller : controllers) {
    if (!has_word(offered, controller)) {
      return fail(fmt::format("cgroup {} does not offer the {} controller (cgroup.controllers: "
                              "'{}')",
                              level.string(), controller, offered),
                  fmt::format("enable it in the parent's cgroup.subtree_control, or drop the "
                              "--cgroup {}.* settings",
                              controller));
    }
    DSEC_TRY(write_file((level / "cgroup.subtree_control").string(), "+" + controller,
                        "cgroup v2 enables controllers only in a cgroup without processes of its "
                        "own: choose a --cgroup-parent whose cgroups hold none"));
  }
  return ok();
}

}  // namespace

Status Cgroup::make_parent(const JailConfig& config) {
  struct statfs fs_info {};
  if (::statfs(config.cgroup_root.c_str(), &fs_info) != 0 ||
      fs_info.f_type != CGROUP2_SUPER_MAGIC) {
    return fail("cgroup v2 is not mounted at " + config.cgroup_root,
                "mount it (mount -t cgroup2 none " + config.cgroup_root +
                    "); a jailed VMM runs in a cgroup of its own");
  }
  std::set<std::string> controllers;
  for (const auto& setting : config.cgroup_settings) {
    controllers.insert(setting.controller());
  }
  fs::path level(config.cgroup_root);
  DSEC_TRY(enable_controllers(level, controllers));
  for (const auto& part : fs::path(config.cgroup_parent)) {
    level /= part;
    if (::mkdir(level.c_str(), 0755) != 0 && errno != EEXIST) {
      return fail_errno("cgroup: mkdir " + level.string(), errno);
    }
    DSEC_TRY(enable_controllers(level, controllers));
  }
  return ok();
}

Result<Cgroup> Cgroup::create(const JailConfig& config) {
  DSEC_TRY(make_parent(config));
  const std::string path = cgroup_path(config);
  if (::mkdir(path.c_str(), 0755) != 0) {
    const int err = errno;
    return fail_errno("cgroup: mkdir " + path, err,
                      err == EEXIST ? "another jailed VMM uses this jail directory's name; give "
                                      "each sandbox a directory of its own name, or remove a "
                                      "cgroup left by a supervisor that was killed"
                                    : "");
  }
  Cgroup cgroup(path);
  for (const auto& setting : config.cgroup_settings) {
    DSEC_TRY(write_file(path + "/" + setting.file, setting.value,
                        "check --cgroup " + setting.file + "=" + setting.value +
                            " against Documentation/admin-guide/cgroup-v2.rst"));
  }
  return cgroup;
}

Cgroup::~Cgroup() {
  if (path_.empty()) {
    return;
  }
  // The last process was reaped, but the cgroup may count it a moment longer: wait for
  // cgroup.events to say "populated 0" (it notifies with POLLPRI), a bounded number of times.
  constexpr int kTries = 20;
  constexpr int kWaitMs = 100;
  int err = 0;
  for (int i = 0; i < kTries; ++i) {
    if (::rmdir(path_.c_str()) == 0) {
      return;
    }
    err = errno;
    if (err != EBUSY) {
      break;
    }
    UniqueFd events(::open((path_ + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
    pollfd pfd{.fd = events.get(), .events = POLLPRI, .revents = 0};
    (void)::poll(&pfd, 1, kWaitMs);
  }
  spdlog::warn("jail: could not remove the cgroup {}: {}", path_, std::strerror(err));
}

Status Cgroup::enter() const {
  return write_file(path_ + "/cgroup.procs", "0", "");
}

uint64_t Cgroup::oom_kills() const {
  return oom_kills_of(path_);
}

uint64_t oom_kills_of(const std::string& path) {
  std::ifstream in(path + "/memory.events");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") {
      return value;
    }
  }
  return 0;
}

std::string Cgroup::read(const std::string& file) const {
  return first_line(path_ + "/" + file);
}

}  // namespace dsec::jail

#include "vmm/jail/jail_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace dsec::jail {
namespace {

constexpr const char* kCgroupHint =
    "give FILE=VALUE with FILE a cgroup v2 interface file such as memory.max, cpu.max or "
    "pids.max";

bool is_file_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
}

}  // namespace

Result<CgroupSetting> parse_cgroup_setting(const std::string& spec) {
  const size_t equals = spec.find('=');
  if (equals == std::string::npos) {
    return fail("--cgroup '" + spec + "' has no '='", kCgroupHint);
  }
  CgroupSetting setting{.file = spec.substr(0, equals), .value = spec.substr(equals + 1)};
  const size_t dot = setting.file.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == setting.file.size() ||
      !std::all_of(setting.file.begin(), setting.file.end(), is_file_name_char) ||
      setting.file.find("..") != std::string::npos) {
    return fail("--cgroup '" + spec + "': '" + setting.file +
                    "' is not a cgroup interface file (<controller>.<setting>)",
                kCgroupHint);
  }
  if (setting.controller() == "cgroup") {
    return fail("--cgroup '" + spec + "': the cgroup core's files (" + setting.file +
                    ") are the jail's own",
                "set a controller's limits: memory.max, cpu.max, pids.max, ...");
  }
  if (setting.value.empty() || setting.value.find('\n') != std::string::npos) {
    return fail("--cgroup '" + spec + "' has an empty or multi-line value", kCgroupHint);
  }
  return setting;
}

std::string cgroup_path(const JailConfig& config) {
  return (std::filesystem::path(config.cgroup_root) / config.cgroup_parent /
          std::filesystem::path(config.dir).filename())
      .string();
}

Status validate(const JailConfig& config) {
  if (config.uid == 0 || config.gid == 0) {
    return fail("--jail needs an unprivileged --uid and --gid (got " + std::to_string(config.uid) +
                    ":" + std::to_string(config.gid) + ")",
                "give ids other than 0, one pair per sandbox, that own nothing else on the host");
  }
  const std::filesystem::path dir(config.dir);
  if (!dir.is_absolute() || dir == dir.root_path() || dir.filename().empty()) {
    return fail("--jail '" + config.dir + "' is not an absolute directory other than /",
                "give the sandbox's own directory, e.g. /run/dsec/sb1");
  }
  struct stat st {};
  if (::stat(config.dir.c_str(), &st) != 0) {
    return fail_errno("--jail " + config.dir, errno, "create the directory first");
  }
  if (!S_ISDIR(st.st_mode)) {
    return fail("--jail " + config.dir + " is not a directory");
  }
  const std::filesystem::path parent(config.cgroup_parent);
  const bool climbs = std::any_of(parent.begin(), parent.end(),
                                  [](const std::filesystem::path& part) { return part == ".."; });
  if (config.cgroup_parent.empty() || parent.is_absolute() || climbs) {
    return fail("--cgroup-parent '" + config.cgroup_parent +
                    "' is not a relative path below the cgroup root",
                "give a name such as dsec-vmm or pool/sandboxes");
  }
  constexpr uint64_t kFewestOpenFiles = 64;
  if (config.max_open_files < kFewestOpenFiles) {
    return fail("--rlimit-nofile " + std::to_string(config.max_open_files) +
                    " leaves the VMM too few file descriptors",
                "give at least " + std::to_string(kFewestOpenFiles));
  }
  return ok();
}

}  // namespace dsec::jail

// What a VMM's jail is made of (docs/jail.md): the directory it pivots into, the ids it
// drops to, its cgroup and the limits written there, and its resource limits.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::jail {

// One file of the jail's cgroup and the value written to it, e.g. memory.max = 256M.
struct CgroupSetting {
  std::string file;   // "<controller>.<setting>": memory.max, cpu.max, pids.max, ...
  std::string value;  // written as given; the kernel checks it

  // The controller the file belongs to ("memory" of memory.max): the one to enable in the
  // parent cgroups.
  std::string controller() const { return file.substr(0, file.find('.')); }
  bool operator==(const CgroupSetting&) const = default;
};

// Parses "FILE=VALUE" of --cgroup: FILE is "<controller>.<setting>" (letters, digits, '_'
// and '.'; no path), VALUE is not empty and has no newline.
Result<CgroupSetting> parse_cgroup_setting(const std::string& spec);

struct JailConfig {
  std::string dir;  // the jail directory; the VMM's root once it locked itself down
  uid_t uid = 0;    // the unprivileged ids it drops to: both must be nonzero
  gid_t gid = 0;
  // The jail's cgroup is <cgroup_root>/<cgroup_parent>/<basename of dir>.
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_parent = "dsec-vmm";
  std::vector<CgroupSetting> cgroup_settings;
  uint64_t max_open_files = 2048;  // RLIMIT_NOFILE; RLIMIT_CORE is 0
  // false: the VMM stays in the network namespace it was started in (dsec-vmm --netns
  // joined one its caller made) instead of a new, empty one.
  bool own_network_namespace = true;
  // Inherited file descriptors that stay open in the jail (a TAP handed in); every other
  // descriptor above stderr is closed.
  std::vector<int> kept_fds;
};

// The jail's cgroup directory: <cgroup_root>/<cgroup_parent>/<basename of dir>.
std::string cgroup_path(const JailConfig& config);

// Checks what needs no privilege: nonzero ids, an absolute directory that exists (not /),
// a cgroup parent that is a relative path without "..", a sane RLIMIT_NOFILE.
Status validate(const JailConfig& config);

}  // namespace dsec::jail

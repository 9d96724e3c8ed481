// A jailed VMM's cgroup (cgroup v2, Documentation/admin-guide/cgroup-v2.rst): made with its
// limits before the VMM starts, read when it ended (did the OOM killer kill it?), removed
// after.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/common/error.h"
#include "vmm/jail/jail_config.h"

namespace dsec::jail {

class Cgroup {
 public:
  // Makes cgroup_path(config): cgroup v2 must be mounted at config.cgroup_root; the parent
  // levels are made as needed, the settings' controllers enabled in each level's
  // cgroup.subtree_control from the root down, then the cgroup (which must not exist) is
  // made and the settings written to it. On failure nothing made is left behind but
  // parent levels.
  static Result<Cgroup> create(const JailConfig& config);
  // What create() does before it makes the cgroup itself: checks cgroup v2 at
  // config.cgroup_root and makes the parent levels with the settings' controllers enabled.
  // A pool calls it at its start, to refuse to run where it could not jail its clones.
  static Status make_parent(const JailConfig& config);

  Cgroup(Cgroup&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  Cgroup& operator=(Cgroup&&) = delete;
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;
  // Removes the cgroup; it must have no process left (its last one reaped).
  ~Cgroup();

  // Leaves the cgroup in place for whoever reaps its last process to remove (a jailed VMM
  // without a supervisor, whose reaper is the pool: jail/supervisor.h).
  void keep() { path_.clear(); }

  const std::string& path() const { return path_; }

  // Moves the calling process into the cgroup.
  Status enter() const;

  // memory.events' oom_kill: how many of the cgroup's processes the OOM killer killed
  // (0 when the memory controller is not enabled for it).
  uint64_t oom_kills() const;

  // The first line of one of the cgroup's files (memory.max, say); empty if unreadable.
  std::string read(const std::string& file) const;

 private:
  explicit Cgroup(std::string path) : path_(std::move(path)) {}

  std::string path_;
};

// memory.events' oom_kill of the cgroup at `path`; 0 when unreadable.
uint64_t oom_kills_of(const std::string& path);

}  // namespace dsec::jail

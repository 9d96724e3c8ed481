// For end-to-end tests of jailed VMMs (docs/jail.md): cgroup v2 where the jail expects it,
// a jail directory owned by the jail's ids, and the jailed VMM's host pid.
#pragma once

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/file_text.h"

namespace dsec::test {

constexpr uid_t kJailUid = 4242;
constexpr gid_t kJailGid = 4343;
constexpr const char* kCgroupRoot = "/sys/fs/cgroup";
constexpr const char* kCgroupParent = "dsec-vmm-jail-test";

// cgroup v2 where the jail expects it. A host with systemd has it, and so does the test
// bed; mounted here, as root, on a host that has not.
inline void ensure_cgroup2_mounted() {
  struct statfs st {};
  if (::statfs(kCgroupRoot, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC) {
    return;
  }
  ASSERT_EQ(::mount("none", kCgroupRoot, "cgroup2", 0, nullptr), 0)
      << "mount -t cgroup2 none " << kCgroupRoot << ": " << std::strerror(errno);
}

// A sandbox's jail directory on a local file system (Unix sockets cannot live on the test
// bed's 9p /tmp), owned by the jail's ids so that the VMM can remove its sockets; removed
// with everything in it.
class JailDir {
 public:
  JailDir() {
    static int counter = 0;
    const std::filesystem::path base =
        ::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path();
    path_ = base / ("dsec-jail-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    std::filesystem::create_directories(path_);
    EXPECT_EQ(::chown(path_.c_str(), kJailUid, kJailGid), 0) << std::strerror(errno);
  }
  JailDir(const JailDir&) = delete;
  JailDir& operator=(const JailDir&) = delete;
  ~JailDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }
  // Where the jail's cgroup is while its VMM runs.
  std::filesystem::path cgroup() const {
    return std::filesystem::path(kCgroupRoot) / kCgroupParent / path_.filename();
  }

  // The jail options for dsec-vmm, with `extra` (--cgroup settings) after them.
  std::vector<std::string> options(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{
        "--jail", path_.string(),           "--uid",           std::to_string(kJailUid),
        "--gid",  std::to_string(kJailGid), "--cgroup-parent", kCgroupParent};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

 private:
  std::filesystem::path path_;
};

// The host pid of the jailed VMM: the one process of its cgroup.
inline pid_t jailed_pid(const JailDir& jail) {
  std::istringstream procs(file_text(jail.cgroup() / "cgroup.procs"));
  std::vector<pid_t> pids;
  for (pid_t pid = 0; procs >> pid;) {
    pids.push_back(pid);
  }
  EXPECT_EQ(pids.size(), 1U) << "cgroup.procs of " << jail.cgroup();
  return pids.empty() ? -1 : pids.front();
}

}  // namespace dsec::test

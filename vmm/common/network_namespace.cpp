#include "vmm/common/network_namespace.h"

#include <fcntl.h>
#include <sched.h>

#include <cerrno>

namespace dsec {

Result<std::string> network_namespace_path(const std::string& name_or_path) {
  if (name_or_path.starts_with('/')) {
    return name_or_path;
  }
  if (name_or_path.empty() || name_or_path == "." || name_or_path == ".." ||
      name_or_path.find('/') != std::string::npos) {
    return fail("'" + name_or_path + "' is not a network namespace's name",
                "give a NAME of " + std::string(kNetnsRunDir) + "/NAME, or an absolute path");
  }
  return std::string(kNetnsRunDir) + "/" + name_or_path;
}

Result<UniqueFd> open_network_namespace(const std::string& name_or_path) {
  const std::string path = DSEC_TRY(network_namespace_path(name_or_path));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return fail_errno("network namespace " + path, errno,
                      "make it first (a CloneNetwork, or `ip netns add`)");
  }
  return fd;
}

Status enter_network_namespace(int fd, const std::string& what) {
  if (::setns(fd, CLONE_NEWNET) != 0) {
    return fail_errno("setns into the network namespace " + what, errno,
                      errno == EINVAL ? "it is not a network namespace's file"
                                      : "needs CAP_SYS_ADMIN (run as root)");
  }
  return ok();
}

}  // namespace dsec

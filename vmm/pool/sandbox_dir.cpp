#include "vmm/pool/sandbox_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "vmm/common/unique_fd.h"

namespace dsec::pool {

Status check_socket_paths_fit(const std::string& state_dir) {
  const std::string longest = state_dir + "/sandboxes/sb-0123456789abcdef/vsock_4294967295";
  if (longest.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return fail("--state-dir " + state_dir + " is too long for its sandboxes' Unix sockets (" +
                    longest + " is " + std::to_string(longest.size()) + " bytes; at most " +
                    std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + ")",
                "give a shorter --state-dir, e.g. /run/dsec-pool");
  }
  return ok();
}

Status make_sandbox_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return fail_errno("cannot make the sandbox directory " + dir, errno,
                      "check that the state directory is writable");
  }
  return ok();
}

Status give_sandbox_dir(const std::string& dir, uint32_t id) {
  // Through a descriptor of the directory, not followed if a link: nothing swapped in is
  // given away.
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || ::fchown(fd.get(), id, id) != 0) {
    return fail_errno("cannot give the sandbox directory " + dir + " to uid " + std::to_string(id),
                      errno, "the daemon jails its clones as root; pass --no-jail otherwise");
  }
  return ok();
}

void remove_sandbox_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::optional<uint32_t> sandbox_dir_owner(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid == 0) {
    return std::nullopt;
  }
  return st.st_uid;
}

}  // namespace dsec::pool

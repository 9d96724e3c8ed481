#include "vmm/common/sibling_binary.h"

#include <limits.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace dsec {

Result<std::string> sibling_binary(std::string_view name) {
  std::array<char, PATH_MAX> self{};
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) {
    return fail_errno("readlink /proc/self/exe", errno);
  }
  std::string path(self.data(), static_cast<size_t>(n));
  path.erase(path.rfind('/') + 1);
  path += name;
  if (::access(path.c_str(), X_OK) != 0) {
    return fail_errno(path, errno,
                      "install " + std::string(name) + " beside " + std::string(self.data()) +
                          " (cmake --install, or build the target " + std::string(name) + ")");
  }
  return path;
}

}  // namespace dsec

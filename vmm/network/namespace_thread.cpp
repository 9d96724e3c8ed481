#include "vmm/network/namespace_thread.h"

#include <fcntl.h>
#include <sched.h>

#include <cerrno>

namespace dsec::network {

Result<UniqueFd> current_network_namespace() {
  UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return fail_errno("/proc/thread-self/ns/net", errno, "needs /proc mounted");
  }
  return fd;
}

Result<UniqueFd> make_network_namespace() {
  Result<UniqueFd> made = fail("unshare(CLONE_NEWNET): never ran");
  std::thread thread([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      made = fail_errno("unshare(CLONE_NEWNET)", errno, "needs CAP_SYS_ADMIN (root)");
      return;
    }
    made = current_network_namespace();
  });
  thread.join();
  return made;
}

}  // namespace dsec::network

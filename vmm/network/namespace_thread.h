// Work done inside another network namespace: on a short-lived thread of its own that
// enters it (setns is per thread), so that the caller's thread never changes namespace and
// nothing is left there if entering or the work fails. Sockets made there (netlink,
// nftables') stay bound to that namespace.
#pragma once

#include <thread>
#include <utility>

#include "vmm/common/error.h"
#include "vmm/common/network_namespace.h"

namespace dsec::network {

// Runs `work` (returning a Result) on a thread that entered the network namespace `fd`.
template <typename Work>
auto in_namespace(int fd, Work&& work) -> decltype(work()) {
  decltype(work()) result = fail("in_namespace: the work never ran");
  std::thread thread([&] {
    if (auto entered = enter_network_namespace(fd, "of a clone network"); !entered) {
      result = std::unexpected(entered.error());
      return;
    }
    result = work();
  });
  thread.join();
  return result;
}

// A new network namespace (unshare on a thread of its own), held by the returned fd.
Result<UniqueFd> make_network_namespace();

// The calling thread's network namespace, held by the returned fd.
Result<UniqueFd> current_network_namespace();

}  // namespace dsec::network

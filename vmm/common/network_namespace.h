// Network namespaces by name, as `ip netns` names them: NAME is the nsfs file
// /run/netns/NAME, bind-mounted there by whoever made the namespace (vmm/network's
// CloneNetwork, or `ip netns add`); an absolute path names such a file anywhere else.
#pragma once

#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec {

inline constexpr const char* kNetnsRunDir = "/run/netns";

// The file that `name_or_path` names: an absolute path as it is, a NAME (no '/', not "."
// or "..") as /run/netns/NAME.
Result<std::string> network_namespace_path(const std::string& name_or_path);

// Opens the namespace `name_or_path` names (O_RDONLY | O_CLOEXEC).
Result<UniqueFd> open_network_namespace(const std::string& name_or_path);

// Moves the calling thread into the network namespace `fd` (setns CLONE_NEWNET, which also
// checks that `fd` is one). Threads it starts afterwards are born there; others stay.
Status enter_network_namespace(int fd, const std::string& what);

}  // namespace dsec

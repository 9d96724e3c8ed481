// Each sandbox's own directory in the state directory, DIR/sandboxes/ID/: its vsock and API
// sockets and its console file, and for a jailed clone its jail (the VMM's root once it
// locked itself down), owned by the clone's uid and gid. Made before its VMM starts,
// removed with everything in it once its VMM ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vmm/common/error.h"

namespace dsec::pool {

// The longest sandbox directory a state directory can hold: ".../sandboxes/sb-<16 hex>".
// Every Unix socket there (vsock, api, and the vsock_PORT listeners of guest-initiated
// connections, PORT up to 10 digits) must fit sockaddr_un's 107 bytes.
Status check_socket_paths_fit(const std::string& state_dir);

// Makes `dir` (which must not exist) with mode 0700, the daemon's.
Status make_sandbox_dir(const std::string& dir);
// Gives `dir` to a jailed clone: `id` as its uid and gid.
Status give_sandbox_dir(const std::string& dir, uint32_t id);
// Removes `dir` and everything in it; symbolic links in it are removed, never followed.
void remove_sandbox_dir(const std::string& dir);
// The uid that owns `dir` when it is not root's (a jailed clone's), else none.
std::optional<uint32_t> sandbox_dir_owner(const std::string& dir);

}  // namespace dsec::pool

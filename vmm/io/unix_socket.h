// Unix stream sockets, non-blocking and close-on-exec: the vsock device's host side and
// the API socket listen and connect through these.
#pragma once

#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::io {

// A listening socket bound at `path`. Fails, naming the path, if it is too long for
// sockaddr_un or already exists (a stale socket is not removed here: it may be another
// process's).
Result<UniqueFd> listen_unix(const std::string& path);
// A socket connected to `path`.
Result<UniqueFd> connect_unix(const std::string& path);

}  // namespace dsec::io

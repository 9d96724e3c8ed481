// The host side of Firecracker's hybrid vsock: Unix stream sockets, and the line a host
// process writes to ask for a guest port.
//   host -> guest: connect to `uds_path`, write "CONNECT <port>\n", read "OK <local port>\n";
//   guest -> host: the guest's connection to port P reaches a listener at "<uds_path>_<P>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::virtio::vsock {

// The longest "CONNECT <port>\n" line read from a host socket.
inline constexpr size_t kMaxConnectLine = 32;

// A non-blocking, close-on-exec listening socket bound at `path`. Fails, naming the path,
// if it is too long for sockaddr_un or already exists (a stale socket is not removed: it
// may be another VM's).
Result<UniqueFd> listen_unix(const std::string& path);
// A non-blocking, close-on-exec socket connected to `path`.
Result<UniqueFd> connect_unix(const std::string& path);
// Where a guest connection to host port `port` goes.
std::string guest_connect_path(const std::string& uds_path, uint32_t port);

// The port of a "CONNECT <port>\n" line (the newline included); nullopt if the line is
// anything else: the port is decimal, 0 to 2^32 - 1, with no sign or padding.
std::optional<uint32_t> parse_connect_line(std::string_view line);

}  // namespace dsec::virtio::vsock

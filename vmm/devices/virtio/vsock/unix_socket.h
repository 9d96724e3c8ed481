// The host side of Firecracker's hybrid vsock: Unix stream sockets, and the line a host
// process writes to ask for a guest port.
//   host -> guest: connect to `uds_path`, write "CONNECT <port>\n", read "OK <local port>\n";
//   guest -> host: the guest's connection to port P reaches a listener at "<uds_path>_<P>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/io/unix_socket.h"

namespace dsec::virtio::vsock {

// The longest "CONNECT <port>\n" line read from a host socket.
inline constexpr size_t kMaxConnectLine = 32;

// The socket `uds_path` and the guests' connections (vmm/io/unix_socket.h).
using io::connect_unix;
using io::listen_unix;

// Where a guest connection to host port `port` goes.
std::string guest_connect_path(const std::string& uds_path, uint32_t port);

// The port of a "CONNECT <port>\n" line (the newline included); nullopt if the line is
// anything else: the port is decimal, 0 to 2^32 - 1, with no sign or padding.
std::optional<uint32_t> parse_connect_line(std::string_view line);

}  // namespace dsec::virtio::vsock

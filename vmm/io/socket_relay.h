// Two stream sockets joined: every byte each sends goes to the other, unchanged, until both
// have ended (a half-close is passed on as one), one fails, or `stop_fd` becomes readable.
// For a proxy that has chosen where a connection goes. Also the TCP connect it needs, with a
// timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::io {

// Relays between `a` and `b` (any blocking mode) until both directions ended; returns then.
void relay(int a, int b, int stop_fd);

// A TCP connection to numeric IPv4 `address`:`port`, made within `timeout`; an error
// that names the address when it is refused, unreachable or too slow, or when `stop_fd`
// became readable first.
Result<UniqueFd> connect_tcp(const std::string& address, uint16_t port,
                             std::chrono::milliseconds timeout, int stop_fd);

// Sends all of `bytes` to `fd` within `timeout` (a slow reader is given up on).
Status send_all(int fd, std::string_view bytes, std::chrono::milliseconds timeout, int stop_fd);

}  // namespace dsec::io

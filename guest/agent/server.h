// The guest agent's listener: accepts connections on a vsock port and serves each in a
// child process of its own (session.h), so one request's crash or hang touches no other.
#pragma once

#include <cstdint>
#include <string>

namespace dsec::agent {

// Listens on vsock `port` (any CID) and serves connections until a fatal error, which it
// returns as a message. Reaps its children, and any orphan re-parented to it as PID 1.
std::string serve_vsock(uint32_t port);

}  // namespace dsec::agent

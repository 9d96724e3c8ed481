#include "vmm/io/unix_socket.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

namespace dsec::io {
namespace {

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return fail("Unix socket path '" + path + "' is empty or longer than " +
                    std::to_string(sizeof(address.sun_path) - 1) + " bytes",
                "choose a shorter path");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

Result<UniqueFd> stream_socket() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail_errno("socket(AF_UNIX)", errno);
  }
  return fd;
}

}  // namespace

Result<UniqueFd> listen_unix(const std::string& path) {
  const sockaddr_un address = DSEC_TRY(unix_address(path));
  UniqueFd fd = DSEC_TRY(stream_socket());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int err = errno;
    return fail_errno("bind " + path, err,
                      err == EADDRINUSE ? "remove the stale socket or choose another path" : "");
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return fail_errno("listen " + path, errno);
  }
  return fd;
}

Result<UniqueFd> connect_unix(const std::string& path) {
  const sockaddr_un address = DSEC_TRY(unix_address(path));
  UniqueFd fd = DSEC_TRY(stream_socket());
  // A Unix stream connect completes at once or fails (EAGAIN: the listener's backlog is
  // full), never EINPROGRESS.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return fail_errno("connect " + path, errno);
  }
  return fd;
}

}  // namespace dsec::io

#include "vmm/devices/virtio/vsock/unix_socket.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace dsec::virtio::vsock {
namespace {

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return fail("vsock: Unix socket path '" + path + "' is empty or longer than " +
                    std::to_string(sizeof(address.sun_path) - 1) + " bytes",
                "choose a shorter path");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

Result<UniqueFd> stream_socket() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail_errno("vsock: socket(AF_UNIX)", errno);
  }
  return fd;
}

}  // namespace

Result<UniqueFd> listen_unix(const std::string& path) {
  const sockaddr_un address = DSEC_TRY(unix_address(path));
  UniqueFd fd = DSEC_TRY(stream_socket());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int err = errno;
    return fail_errno(
        "vsock: bind " + path, err,
        err == EADDRINUSE ? "remove the stale socket or choose another uds_path" : "");
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return fail_errno("vsock: listen " + path, errno);
  }
  return fd;
}

Result<UniqueFd> connect_unix(const std::string& path) {
  const sockaddr_un address = DSEC_TRY(unix_address(path));
  UniqueFd fd = DSEC_TRY(stream_socket());
  // A Unix stream connect completes at once or fails (EAGAIN: the listener's backlog is
  // full), never EINPROGRESS.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return fail_errno("vsock: connect " + path, errno);
  }
  return fd;
}

std::string guest_connect_path(const std::string& uds_path, uint32_t port) {
  return uds_path + "_" + std::to_string(port);
}

std::optional<uint32_t> parse_connect_line(std::string_view line) {
  constexpr std::string_view kPrefix = "CONNECT ";
  if (!line.starts_with(kPrefix) || !line.ends_with('\n')) {
    return std::nullopt;
  }
  const std::string_view digits = line.substr(kPrefix.size(), line.size() - kPrefix.size() - 1);
  if (digits.empty() || digits.size() > 10 || digits[0] < '0' || digits[0] > '9' ||
      (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  uint32_t port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc() || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return port;
}

}  // namespace dsec::virtio::vsock

#include "vmm/devices/virtio/vsock/unix_socket.h"

#include <charconv>

namespace dsec::virtio::vsock {

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

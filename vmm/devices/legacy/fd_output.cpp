#include "vmm/devices/legacy/fd_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace dsec::devices {

Serial::OutputSink fd_output(int fd) {
  return [fd](std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return;  // dropped: see the header
      }
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
  };
}

}  // namespace dsec::devices

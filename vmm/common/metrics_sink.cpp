#include "vmm/common/metrics_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace dsec {

Result<MetricsSink> MetricsSink::open(const std::string& path, std::string what) {
  // O_RDWR: opening a FIFO write-only and non-blocking fails (ENXIO) while it has no reader.
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_NONBLOCK | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail_errno("cannot open " + what + " " + path, errno,
                      "give a path to a FIFO or a file this process can write");
  }
  return MetricsSink(path, std::move(what), UniqueFd(fd));
}

Status MetricsSink::write_line(std::string_view line) {
  std::string whole(line);
  whole += '\n';
  ssize_t n;
  do {
    // One write(2) (every thread's seccomp filter allows it): a line of at most PIPE_BUF
    // bytes reaches a FIFO whole or not at all.
    n = ::write(fd_.get(), whole.data(), whole.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return fail_errno(
        "writing to " + what_ + " " + path_, errno,
        errno == EAGAIN ? "the FIFO is full: read it; this line was dropped" : std::string());
  }
  if (static_cast<size_t>(n) != whole.size()) {
    return fail(what_ + " " + path_ + " took " + std::to_string(n) + " of the line's " +
                    std::to_string(whole.size()) + " bytes; the rest was dropped",
                "read the FIFO faster");
  }
  return ok();
}

}  // namespace dsec

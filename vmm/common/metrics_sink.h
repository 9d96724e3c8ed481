// Where Firecracker's metrics go (PUT /metrics, --config-file's "metrics"): a file, or a
// named FIFO, that gets one JSON object per line. The VMM's log file (PUT /logger,
// --log-path) is opened and written the same way, one log line at a time. Opened for appending and
// non-blocking, as Firecracker opens it: a FIFO nobody reads yet opens all the same (read-write, so
// that open(2) does not wait for a reader), and a full FIFO drops a line rather than block the
// thread that writes it.
#pragma once

#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec {

class MetricsSink {
 public:
  // Opens `path`, an existing FIFO or a file (created, owner-only, if missing); `what`
  // names it in errors.
  static Result<MetricsSink> open(const std::string& path, std::string what = "the metrics file");

  // Writes `line` and a newline. Fails, without blocking, when a FIFO has no room for it
  // (its reader is gone or slow): the line is dropped, or its end if the FIFO took a part.
  Status write_line(std::string_view line);
  const std::string& path() const { return path_; }

 private:
  MetricsSink(std::string path, std::string what, UniqueFd fd)
      : path_(std::move(path)), what_(std::move(what)), fd_(std::move(fd)) {}

  std::string path_;
  std::string what_;
  UniqueFd fd_;
};

}  // namespace dsec

// The VMM's own log: stderr, plus the file a PUT /logger (or a --config-file's "logger")
// names. main() makes it the default logger; configure_log() adds the file and sets the
// level while other threads log.
#pragma once

#include <cstdint>
#include <memory>

#include "vmm/api/preboot_requests.h"
#include "vmm/common/error.h"

namespace spdlog {
class logger;
}  // namespace spdlog

namespace dsec::cli {

// A logger that writes to stderr and to whatever configure_log() adds later.
std::shared_ptr<spdlog::logger> make_vmm_logger();

// From now on the default logger (made by make_vmm_logger) writes at most `bytes` more to
// stderr, then one line that says so, then nothing (0: no limit): a pool clone's stderr is
// its log file on the host, which nothing a guest does may fill.
void limit_stderr_log(uint64_t bytes);

// The default logger (made by make_vmm_logger) also writes to request.log_path (appended
// to; a named pipe works too), with the level shown when show_level, and logs from
// request.level up. There is no source location to show: show_log_origin changes nothing
// (docs/api.md).
Status configure_log(const api::LoggerRequest& request);

}  // namespace dsec::cli

#include "vmm/cli/log_output.h"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "vmm/common/capped_log_sink.h"
#include "vmm/common/metrics_sink.h"

namespace dsec::cli {
namespace {

spdlog::level::level_enum spdlog_level(api::LogLevel level) {
  switch (level) {
    case api::LogLevel::kError:
      return spdlog::level::err;
    case api::LogLevel::kWarning:
      return spdlog::level::warn;
    case api::LogLevel::kInfo:
      return spdlog::level::info;
    case api::LogLevel::kDebug:
      return spdlog::level::debug;
    case api::LogLevel::kTrace:
      return spdlog::level::trace;
    case api::LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

// The log's file or FIFO, opened and written as Firecracker does its log: non-blocking, so
// that a FIFO nobody reads yet opens at once and a full one drops a line rather than hold
// the thread that logs it. Used under the distributing sink's lock.
class LogFileSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit LogFileSink(MetricsSink file) : file_(std::move(file)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::string_view text(line.data(), line.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.remove_suffix(1);  // write_line ends it
    }
    (void)file_.write_line(text);  // a line a full FIFO has no room for is dropped
  }
  void flush_() override {}  // each line is one write(2)

 private:
  MetricsSink file_;
};

// The default logger's distributing sink (make_vmm_logger's); null for another logger.
std::shared_ptr<spdlog::sinks::dist_sink_mt> vmm_log_outputs() {
  const auto logger = spdlog::default_logger();
  return logger->sinks().empty()
             ? nullptr
             : std::dynamic_pointer_cast<spdlog::sinks::dist_sink_mt>(logger->sinks().front());
}

}  // namespace

std::shared_ptr<spdlog::logger> make_vmm_logger() {
  // stderr: stdout carries the guest's console. The distributing sink takes more sinks
  // under its own lock while other threads log through it.
  auto outputs = std::make_shared<spdlog::sinks::dist_sink_mt>(std::vector<spdlog::sink_ptr>{
      std::make_shared<CappedLogSink>(std::make_shared<spdlog::sinks::stderr_color_sink_mt>())});
  return std::make_shared<spdlog::logger>("", std::move(outputs));
}

void limit_stderr_log(uint64_t bytes) {
  const auto outputs = vmm_log_outputs();
  if (!outputs) {
    return;
  }
  for (const auto& sink : outputs->sinks()) {
    if (auto capped = std::dynamic_pointer_cast<CappedLogSink>(sink)) {
      capped->set_limit(bytes);
    }
  }
}

Status configure_log(const api::LoggerRequest& request) {
  const auto logger = spdlog::default_logger();
  const auto outputs = vmm_log_outputs();
  if (!outputs) {
    return fail("the VMM's log cannot take another output");
  }
  if (!request.log_path.empty()) {
    // A missing directory is the caller's to make (nothing here makes one: the API
    // thread's filter forbids mkdir); said as such rather than as open(2)'s ENOENT.
    const std::filesystem::path directory = std::filesystem::path(request.log_path).parent_path();
    std::error_code error;
    if (!directory.empty() && !std::filesystem::is_directory(directory, error)) {
      return fail("cannot open the log file " + request.log_path + ": " + directory.string() +
                      " is not a directory",
                  "give a path in a directory that exists and this VMM may write");
    }
    auto file = std::make_shared<LogFileSink>(
        DSEC_TRY(MetricsSink::open(request.log_path, "the log file")));
    file->set_pattern(request.show_level ? "%Y-%m-%dT%H:%M:%S.%f [%l] %v"
                                         : "%Y-%m-%dT%H:%M:%S.%f %v");
    outputs->add_sink(std::move(file));
  }
  if (request.level) {
    logger->set_level(spdlog_level(*request.level));
  }
  if (!request.log_path.empty()) {
    spdlog::info("log: to stderr and {}", request.log_path);
  }
  return ok();
}

}  // namespace dsec::cli

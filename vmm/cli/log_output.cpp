#include "vmm/cli/log_output.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "vmm/common/capped_log_sink.h"

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
  auto outputs = std::make_shared<spdlog::sinks::dist_sink_mt>(
      std::vector<spdlog::sink_ptr>{std::make_shared<CappedLogSink>(
          std::make_shared<spdlog::sinks::stderr_color_sink_mt>())});
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
    // spdlog makes a missing directory itself, which the API thread's filter forbids (it
    // would end the VMM): a missing one is the caller's to make.
    const std::filesystem::path directory =
        std::filesystem::path(request.log_path).parent_path();
    std::error_code error;
    if (!directory.empty() && !std::filesystem::is_directory(directory, error)) {
      return fail("cannot open the log file " + request.log_path + ": " + directory.string() +
                      " is not a directory",
                  "give a path in a directory that exists and this VMM may write");
    }
    std::shared_ptr<spdlog::sinks::basic_file_sink_mt> file;
    try {
      file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(request.log_path,
                                                                 /*truncate=*/false);
    } catch (const spdlog::spdlog_ex& e) {
      return fail("cannot open the log file " + request.log_path + ": " + e.what(),
                  "give a path in a directory that exists and this VMM may write");
    }
    file->set_pattern(request.show_level ? "%Y-%m-%dT%H:%M:%S.%f [%l] %v"
                                         : "%Y-%m-%dT%H:%M:%S.%f %v");
    outputs->add_sink(std::move(file));
    // Each line reaches the file as it is logged, as Firecracker writes its log: a reader
    // of a named pipe, or of the file of a VMM that is killed, misses nothing.
    logger->flush_on(spdlog::level::trace);
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

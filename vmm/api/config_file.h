// Firecracker's --config-file: the pre-boot requests as one JSON document ("boot-source",
// "drives", "machine-config", "network-interfaces", "vsock", "entropy", "logger",
// "metrics"), read by the same parsers as the API's bodies and put together by the same
// PrebootConfig, so that a file and a sequence of requests make the same VM.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "vmm/api/preboot_config.h"
#include "vmm/api/preboot_requests.h"
#include "vmm/common/error.h"

namespace dsec::api {

struct ConfigFile {
  PrebootConfig preboot;
  std::optional<LoggerRequest> logger;
  std::optional<std::string> metrics_path;  // "metrics": {"metrics_path"}
};

// `text` as a configuration. Strict: an unknown section or field, a wrong type, a missing
// field or a value this VMM cannot honour (a CPU template, a balloon) is refused by name;
// a section given as null is absent.
Result<ConfigFile> parse_config_file(std::string_view text);
// The file at `path`, read and parsed; errors name it.
Result<ConfigFile> read_config_file(const std::string& path);

}  // namespace dsec::api

// `dsec-vmm firecracker [Firecracker's options]`, also what the binary does when it is
// started as `firecracker` (an installed symlink, main.cpp): Firecracker's command line
// (src/firecracker/src/main.rs), so that the tools that exec Firecracker (firectl,
// firecracker-go-sdk, Kata, firecracker-containerd, the jailer) start dsec-vmm unchanged.
// Each option that has a meaning here does what `dsec-vmm serve` does with it; the others
// are refused by name before anything starts, never ignored (docs/api.md).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "vmm/api/api_service.h"
#include "vmm/api/vm_api.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/serve_command.h"
#include "vmm/common/file.h"
#include "vmm/mmds/mmds.h"
#include "vmm/snapshot/state_file.h"

namespace dsec::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Firecracker's default --api-sock.
constexpr const char* kDefaultApiSocket = "/run/firecracker.socket";

struct FirecrackerOptions {
  ServeCommandOptions serve;
  bool version = false;
  bool snapshot_version = false;
  std::string describe_snapshot;
  // The logger's options, made into a PUT /logger body.
  std::string log_path;
  std::string level;
  bool show_level = false;
  bool show_log_origin = false;
  bool no_seccomp = false;
  uint64_t max_payload = 0;  // 0: not given
  bool boot_timer = false;
  uint64_t start_time_us = 0;
  uint64_t start_time_cpu_us = 0;
  uint64_t parent_cpu_time_us = 0;
  // Options refused by name: set when given.
  std::string seccomp_filter;
  std::string module;
  // MMDS: the file whose JSON the data store starts with, and the store's size limit
  // (0: --http-api-max-payload-size's, as Firecracker).
  std::string metadata;
  uint64_t mmds_size_limit = 0;
  bool enable_pci = false;
};

// Firecracker's instance ids (utils::validators::validate_instance_id): 1 to 64 letters,
// digits or '-'.
Status check_instance_id(const std::string& id) {
  const bool valid = !id.empty() && id.size() <= 64 && std::ranges::all_of(id, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-';
  });
  if (!valid) {
    return fail(fmt::format("--id \"{}\" is not an instance id", id),
                "give 1 to 64 letters, digits or '-', as Firecracker takes");
  }
  return ok();
}

// The first option given that dsec-vmm refuses, with why; ok() if none.
Status refuse_unsupported(const FirecrackerOptions& o) {
  if (!o.seccomp_filter.empty()) {
    return fail(
        "--seccomp-filter is not supported: dsec-vmm installs its own filter for each thread "
        "role (docs/seccomp.md) and cannot load Firecracker's compiled filters",
        "leave it out (dsec-vmm's filters are on), or give --no-seccomp");
  }
  if (!o.module.empty()) {
    return fail("--module is not supported: dsec-vmm's log has no per-module filter",
                "leave it out");
  }
  if (o.enable_pci) {
    return fail("--enable-pci is not supported: dsec-vmm's virtio devices are virtio-mmio",
                "leave it out");
  }
  return ok();
}

// --log-path, --level, --show-level and --show-log-origin, read as PUT /logger reads its
// body (the same names for a bad level).
Result<std::optional<api::LoggerRequest>> logger_request(const FirecrackerOptions& o) {
  if (o.log_path.empty() && o.level.empty() && !o.show_level && !o.show_log_origin) {
    return std::nullopt;
  }
  nlohmann::json body = {{"show_level", o.show_level}, {"show_log_origin", o.show_log_origin}};
  if (!o.log_path.empty()) {
    body["log_path"] = o.log_path;
  }
  if (!o.level.empty()) {
    body["level"] = o.level;
  }
  auto parsed = api::parse_logger(DSEC_TRY(api::parse_body(body.dump())));
  if (!parsed) {
    return std::unexpected(parsed.error().with_context("--level"));
  }
  return std::optional<api::LoggerRequest>(std::move(*parsed));
}

// The metadata service's store: --mmds-size-limit's (else --http-api-max-payload-size's, else
// 51200 bytes, as Firecracker), with --metadata's document in it.
Result<std::shared_ptr<mmds::Mmds>> metadata_service(const FirecrackerOptions& o) {
  const uint64_t limit = o.mmds_size_limit != 0 ? o.mmds_size_limit
                         : o.max_payload != 0   ? o.max_payload
                                                : mmds::DataStore::kDefaultSizeLimit;
  auto service = std::make_shared<mmds::Mmds>(limit);
  if (o.metadata.empty()) {
    return service;
  }
  constexpr uint64_t kMaxMetadataFileBytes = uint64_t{16} << 20;  // whitespace included
  const auto file = map_file(o.metadata, kMaxMetadataFileBytes);
  if (!file) {
    return std::unexpected(file.error().with_context("--metadata"));
  }
  const auto bytes = file->bytes();
  if (auto put = service->put(
          std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      !put) {
    return fail(fmt::format("--metadata {}: {}", o.metadata, put.error().message),
                put.error().kind == mmds::UpdateError::kTooLarge
                    ? "give a larger --mmds-size-limit, or a smaller document"
                    : "give a file that holds one JSON document");
  }
  return service;
}

// dsec-vmm's snapshot state file format version, as Firecracker prints its own.
std::string snapshot_format_version() {
  return fmt::format("v{}.0.0", snapshot::kStateFileFormatVersion);
}

int firecracker_main(FirecrackerOptions& o, Clock::time_point process_start) {
  if (o.version) {
    // Firecracker's first line, which the tools parse ("Firecracker v1.16.1"), and ours.
    std::printf("Firecracker v%s\n\ndsec-vmm %s\n", api::kFirecrackerVersion, api::kVmmVersion);
    return 0;
  }
  if (o.snapshot_version) {
    std::printf("%s\n", snapshot_format_version().c_str());
    return 0;
  }
  auto refuse = [](const Error& error) {
    (void)std::fprintf(stderr, "dsec-vmm firecracker: %s\n", error.message().c_str());
    return 1;
  };
  if (!o.describe_snapshot.empty()) {
    if (auto file = snapshot::StateFile::load(o.describe_snapshot); !file) {
      return refuse(file.error());
    }
    std::printf("%s\n", snapshot_format_version().c_str());
    return 0;
  }
  if (auto checked = check_instance_id(o.serve.api.id); !checked) {
    return refuse(checked.error());
  }
  if (auto supported = refuse_unsupported(o); !supported) {
    return refuse(supported.error());
  }
  auto logger = logger_request(o);
  if (!logger) {
    return refuse(logger.error());
  }
  o.serve.logger = std::move(*logger);
  if (o.no_seccomp) {
    o.serve.seccomp = seccomp::Mode::kOff;
  }
  o.serve.api.max_body_bytes = o.max_payload;
  auto metadata = metadata_service(o);
  if (!metadata) {
    return refuse(metadata.error());
  }
  o.serve.api.mmds = std::move(*metadata);
  if (o.serve.no_api) {
    o.serve.api.socket.clear();
  }
  return serve_main(o.serve, process_start);
}

}  // namespace

void add_firecracker_command(CLI::App& app, CommandAction& action,
                             Clock::time_point process_start) {
  auto o = std::make_shared<FirecrackerOptions>();
  o->serve.command = "firecracker";
  CLI::App* fc = app.add_subcommand(
      "firecracker",
      fmt::format("Firecracker's command line (v{}): a fresh VMM on --api-sock, as `serve` "
                  "starts one; also what this binary does when started as `firecracker`",
                  api::kFirecrackerVersion));
  fc->footer(
      "The same VMM as dsec-vmm serve (see its --help, and docs/api.md): its API socket, "
      "--config-file and --no-api, its exit statuses. The guest's console is on stdin and "
      "stdout, as Firecracker's serial port. Options of Firecracker's that dsec-vmm cannot "
      "honour are refused by name (exit status 1) before anything starts.");
  fc->add_option("--api-sock", o->serve.api.socket, "Path to the API's Unix socket")
      ->default_val(kDefaultApiSocket);
  o->serve.api.id = api::ApiService::kDefaultInstanceId;
  fc->add_option("--id", o->serve.api.id,
                 "The instance id (GET /'s id): 1 to 64 letters, digits or '-'")
      ->capture_default_str();
  auto* config_file =
      fc->add_option("--config-file", o->serve.config_file,
                     "Boot the VM this file describes (Firecracker's JSON configuration) at once");
  fc->add_flag("--no-api", o->serve.no_api, "Serve no API socket (needs --config-file)")
      ->needs(config_file);
  fc->add_flag("--no-seccomp", o->no_seccomp,
               "No seccomp filters (dsec-vmm's own, one per thread role, are on otherwise)");
  fc->add_option("--seccomp-filter", o->seccomp_filter,
                 "Refused: dsec-vmm cannot load Firecracker's compiled filters")
      ->excludes("--no-seccomp");
  fc->add_option("--log-path", o->log_path,
                 "The VMM's log also goes to this file or FIFO (opened without blocking), as "
                 "PUT /logger's log_path");
  fc->add_option("--level", o->level,
                 "The log level: Error, Warning (or Warn), Info, Debug, Trace, Off, in any case");
  fc->add_flag("--show-level", o->show_level, "Each line of the --log-path file has its level");
  fc->add_flag("--show-log-origin", o->show_log_origin,
               "Taken; changes nothing: dsec-vmm's log lines carry no source location");
  fc->add_option("--module", o->module, "Refused: dsec-vmm's log has no per-module filter");
  fc->add_option("--metrics-path", o->serve.metrics_path,
                 "Firecracker's metrics go to this file or FIFO (opened without blocking), as "
                 "PUT /metrics's metrics_path: a line every 60 s and at each FlushMetrics");
  fc->add_flag("--boot-timer", o->boot_timer,
               "Taken: dsec-vmm's boot timer is always on, at I/O port 0x440 "
               "(docs/boot-timer.md); Firecracker's MMIO boot timer is not there");
  fc->add_option("--http-api-max-payload-size", o->max_payload,
                 "The largest request body the API takes, in bytes")
      ->check(CLI::Range(uint64_t{1}, uint64_t{16} << 20))
      ->default_str("65536");
  fc->add_option("--start-time-us", o->start_time_us,
                 "Taken (the jailer passes it); unused: dsec-vmm has no start-up time metric");
  fc->add_option("--start-time-cpu-us", o->start_time_cpu_us, "Taken, as --start-time-us");
  fc->add_option("--parent-cpu-time-us", o->parent_cpu_time_us, "Taken, as --start-time-us");
  fc->add_option("--metadata", o->metadata,
                 "A JSON file the metadata service (MMDS) starts with, as PUT /mmds");
  fc->add_option("--mmds-size-limit", o->mmds_size_limit,
                 "The MMDS document's largest size, in bytes (compact JSON); default: "
                 "--http-api-max-payload-size's, else 51200")
      ->check(CLI::Range(uint64_t{1}, uint64_t{64} << 20));
  fc->add_flag("--enable-pci", o->enable_pci, "Refused: dsec-vmm's virtio devices are virtio-mmio");
  fc->add_flag("--version", o->version,
               fmt::format("Print Firecracker's version this VMM speaks (Firecracker v{}), then "
                           "dsec-vmm's",
                           api::kFirecrackerVersion));
  fc->add_flag("--snapshot-version", o->snapshot_version,
               "Print the version of dsec-vmm's snapshot state file format (as vN.0.0)");
  fc->add_option("--describe-snapshot", o->describe_snapshot,
                 "Print the format version of this snapshot state file, once it passed every "
                 "check of a restore's (a Firecracker snapshot is not one)");
  fc->callback([&action, o, process_start] {
    action = [o, process_start] { return firecracker_main(*o, process_start); };
  });
}

}  // namespace dsec::cli

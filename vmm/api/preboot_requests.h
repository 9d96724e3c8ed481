// The bodies of Firecracker's pre-boot requests (PUT /boot-source, /machine-config,
// /drives/{id}, /network-interfaces/{id}, /vsock, /entropy, /logger, /metrics, /actions),
// JSON to typed values with Firecracker's field names. The same parsers read the sections
// of a --config-file. Strict as vm_requests: malformed JSON, an unknown field, a field of
// the wrong type or a missing one is refused by name; an optional field given as null is
// absent, as in Firecracker. A field for something this VMM cannot do (a CPU template,
// SMT) is refused, never ignored. What the values mean (is the
// kernel there, is the vCPU count in range) is preboot_config's to check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/json_object.h"
#include "vmm/devices/rate_limiter_config.h"

namespace dsec::api {

// An API body as Firecracker's requests are read: a JSON object whose optional fields may
// be null.
Result<JsonObject> parse_body(std::string_view body);

// PUT /boot-source {"kernel_image_path", "initrd_path", "boot_args"}
struct BootSourceRequest {
  std::string kernel_image_path;
  std::string initrd_path;               // empty: none
  std::optional<std::string> boot_args;  // absent: machine::kDefaultCmdline
  bool operator==(const BootSourceRequest&) const = default;
};
Result<BootSourceRequest> parse_boot_source(JsonObject body);

// PUT /machine-config (vcpu_count and mem_size_mib required) and PATCH /machine-config
// (at least one field). smt as given; track_dirty_pages is taken when false, cpu_template when
// "None", huge_pages when "None" or "Transparent" (guest memory is advised transparent huge
// pages either way).
enum class Update { kWhole, kPartial };
struct MachineConfigUpdate {
  std::optional<uint32_t> vcpu_count;
  std::optional<uint64_t> mem_size_mib;
  std::optional<bool> smt;  // a PUT's is always set (false when left out)
  bool operator==(const MachineConfigUpdate&) const = default;
};
Result<MachineConfigUpdate> parse_machine_config(JsonObject body, Update update);

// A resource's id, from the path (/drives/{drive_id}) and the body, which must agree; a
// --config-file gives only the body's (path_id nullopt). ASCII letters, digits, '_' or
// '-', at least one, of any length as in Firecracker (which takes '_' and alphanumerics).
using PathId = std::optional<std::string_view>;

// PUT /drives/{drive_id} {"drive_id", "path_on_host", "is_root_device", "is_read_only",
// "partuuid", "rate_limiter"}. cache_type ("Unsafe", "Writeback") and io_engine ("Sync", "Async")
// are taken: every disk is served through io_uring and honours the guest's flushes.
struct DriveRequest {
  std::string drive_id;
  std::string path_on_host;
  bool is_root_device = false;
  bool is_read_only = false;
  std::string partuuid;  // empty: none
  devices::RateLimiterConfig rate_limiter{};
  bool operator==(const DriveRequest&) const = default;
};
Result<DriveRequest> parse_drive(JsonObject body, PathId path_id);

// PUT /network-interfaces/{iface_id} {"iface_id", "host_dev_name", "guest_mac",
// "rx_rate_limiter", "tx_rate_limiter"}
struct NetworkInterfaceRequest {
  std::string iface_id;
  std::string host_dev_name;
  std::string guest_mac;  // empty: machine::NetConfig::kDefaultGuestMac
  devices::RateLimiterConfig rx_rate_limiter{};
  devices::RateLimiterConfig tx_rate_limiter{};
  bool operator==(const NetworkInterfaceRequest&) const = default;
};
Result<NetworkInterfaceRequest> parse_network_interface(JsonObject body, PathId path_id);

// PATCH /drives/{drive_id} {"drive_id", "path_on_host", "rate_limiter"} and PATCH
// /network-interfaces/{iface_id} {"iface_id", "rx_rate_limiter", "tx_rate_limiter"}: a
// running VM's device. A bucket given replaces the device's, one left out stays as it is
// (size 0 turns it off), as in Firecracker. A drive's path_on_host, when given, is its new
// file.
struct RateLimiterUpdate {
  std::optional<devices::TokenBucketConfig> bandwidth;
  std::optional<devices::TokenBucketConfig> ops;
  // The device's limiter after this update.
  devices::RateLimiterConfig applied_to(const devices::RateLimiterConfig& current) const;
  bool operator==(const RateLimiterUpdate&) const = default;
};
struct DriveUpdate {
  std::string drive_id;
  std::optional<std::string> path_on_host;  // absent: the file stays
  RateLimiterUpdate rate_limiter{};
  bool operator==(const DriveUpdate&) const = default;
};
Result<DriveUpdate> parse_drive_update(JsonObject body, PathId path_id);
struct NetworkInterfaceUpdate {
  std::string iface_id;
  RateLimiterUpdate rx_rate_limiter{};
  RateLimiterUpdate tx_rate_limiter{};
  bool operator==(const NetworkInterfaceUpdate&) const = default;
};
Result<NetworkInterfaceUpdate> parse_network_interface_update(JsonObject body, PathId path_id);

// PUT /vsock {"guest_cid", "uds_path"}; Firecracker's deprecated "vsock_id" is taken and
// unused, as Firecracker does.
struct VsockRequest {
  uint64_t guest_cid = 0;
  std::string uds_path;
  bool operator==(const VsockRequest&) const = default;
};
Result<VsockRequest> parse_vsock(JsonObject body);

// PUT /entropy {"rate_limiter"}: a virtio-rng device, with Firecracker's rate limiter (each
// request one op, the bytes it asks for its bandwidth).
struct EntropyRequest {
  devices::RateLimiterConfig rate_limiter{};
  bool operator==(const EntropyRequest&) const = default;
};
Result<EntropyRequest> parse_entropy(JsonObject body);

// PUT /logger {"log_path", "level", "show_level", "show_log_origin"}; "module" is refused.
enum class LogLevel { kError, kWarning, kInfo, kDebug, kTrace, kOff };
struct LoggerRequest {
  std::string log_path;  // empty: the log stays where it is (stderr)
  std::optional<LogLevel> level;
  bool show_level = false;
  bool show_log_origin = false;
  bool operator==(const LoggerRequest&) const = default;
};
Result<LoggerRequest> parse_logger(JsonObject body);

// PUT /metrics {"metrics_path"}: the path of the file or FIFO the metrics go to.
Result<std::string> parse_metrics(JsonObject body);

// PUT /actions {"action_type"}
enum class Action { kInstanceStart, kSendCtrlAltDel, kFlushMetrics };
Result<Action> parse_action(JsonObject body);

}  // namespace dsec::api

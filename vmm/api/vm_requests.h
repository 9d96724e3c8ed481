// The bodies of the VM's API requests, JSON to typed values, with Firecracker's field
// names. Strict: malformed JSON, an unknown field, a field of the wrong type, a missing
// one, or a value this VMM does not support is refused with a message that says which.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/http/message.h"
#include "vmm/machine/snapshot_config.h"

namespace dsec::api {

// PATCH /vm {"state": "Paused" | "Resumed"}
enum class VmStateChange { kPause, kResume };
Result<VmStateChange> parse_vm_state(std::string_view body);

// PUT /snapshot/create {"snapshot_type": "Full", "snapshot_path", "mem_file_path"}
// snapshot_type may be left out (Full); "Diff" is refused: there are no diff snapshots yet.
struct SnapshotCreateRequest {
  std::string snapshot_path;  // the state file
  std::string mem_file_path;  // the memory file
  bool operator==(const SnapshotCreateRequest&) const = default;
};
Result<SnapshotCreateRequest> parse_snapshot_create(std::string_view body);

// PUT /snapshot/load {"snapshot_path", "mem_backend": {"backend_type": "File",
// "backend_path"}, "resume_vm", "network_overrides": [{"iface_id", "host_dev_name"}],
// "vsock_override": {"uds_path"}}; the older "mem_file_path" in place of mem_backend is
// taken too (exactly one of the two). "enable_diff_snapshots" and "track_dirty_pages" are
// taken when false. backend_type "Uffd" is refused: memory comes from the file only.
struct NetworkOverride {
  std::string iface_id;
  std::string host_dev_name;
  bool operator==(const NetworkOverride&) const = default;
};
struct SnapshotLoadRequest {
  std::string snapshot_path;
  std::string mem_file_path;
  bool resume_vm = false;
  std::vector<NetworkOverride> network_overrides;
  std::optional<std::string> vsock_uds_path;
  bool operator==(const SnapshotLoadRequest&) const = default;
};
Result<SnapshotLoadRequest> parse_snapshot_load(std::string_view body);

// A load's overrides as a restore takes them: the vsock socket, and the TAP of each
// network interface named (the restore refuses an iface_id the snapshot has not).
machine::RestoreOverrides restore_overrides(const SnapshotLoadRequest& request);

// Firecracker's deprecated fields: the message its api_server logs, and answers with a
// `Deprecation: true` header for, when the body of `method` `pattern` (a route's pattern,
// "/machine-config") uses one of them (present and not null; enable_diff_snapshots when
// true); nullopt otherwise, and for a body that is not a JSON object.
std::optional<std::string> deprecation_of(http::Method method, std::string_view pattern,
                                          std::string_view body);

}  // namespace dsec::api

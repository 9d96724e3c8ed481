// envd's filesystem.Filesystem service (spec/envd/filesystem/filesystem.proto) on the
// agent's file-system requests (docs/agent-protocol.md, "File system"): Stat, ListDir (with
// depth), MakeDir (with parents; already_exists when it was there), Move and Remove, each
// answering EntryInfo as envd does, and WatchDir (a server stream of the changes in a
// directory, from the agent's inotify watch). The polling watchers (CreateWatcher,
// GetWatcherEvents, RemoveWatcher) are not served: unimplemented.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "vmm/agent/fs_protocol.h"
#include "vmm/e2b/envd_service.h"

namespace dsec::e2b {

std::vector<EnvdMethod> fs_methods();

// An entry as envd's EntryInfo: name, type, path, size, mode, permissions ("-rw-r--r--"),
// owner, group, modifiedTime (RFC 3339), symlinkTarget.
nlohmann::json entry_info(const agent::FsEntry& entry);

}  // namespace dsec::e2b

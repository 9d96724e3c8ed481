// fs-watch (docs/agent-protocol.md, "File system"): a directory watched with inotify, its
// events streamed to the host as fs-event frames until the host closes the connection.
// Served in a session child (session.cpp), which it occupies for as long as it lasts.
#pragma once

#include <cstdint>

#include "vmm/agent/frame_io.h"
#include "vmm/agent/fs_protocol.h"
#include "vmm/common/error.h"

namespace dsec::agent {

// How many directories a recursive watch follows at most.
inline constexpr size_t kMaxWatchedDirectories = 1024;

Status handle_fs_watch(int fd, FrameReader& reader, uint32_t id, const FsWatchRequest& req);

}  // namespace dsec::agent

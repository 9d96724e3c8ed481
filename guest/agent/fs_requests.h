// The agent's file system requests (docs/agent-protocol.md, "File system"), each served on
// its connection in a session child (session.cpp): stat, list to a depth, make directories
// with their parents, move, and remove a tree. A failure is answered as an error frame
// naming the path and the reason; only a broken connection is an Error.
#pragma once

#include <cstdint>

#include "vmm/agent/fs_protocol.h"
#include "vmm/common/error.h"

namespace dsec::agent {

Status handle_fs_stat(int fd, uint32_t id, const FsPath& req);
Status handle_fs_list(int fd, uint32_t id, const FsListRequest& req);
Status handle_fs_mkdir(int fd, uint32_t id, const FsPath& req);
Status handle_fs_move(int fd, uint32_t id, const FsMoveRequest& req);
Status handle_fs_remove(int fd, uint32_t id, const FsPath& req);

}  // namespace dsec::agent

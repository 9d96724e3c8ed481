// Files copied out of a guest onto the host (`dsec-vmm cp vm:PATH HOST`), which treats all
// the guest says as hostile: the mode it gives, the size it announces, the bytes it sends.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "vmm/agent/client.h"
#include "vmm/common/error.h"

namespace dsec::agent {

// The permission bits a file copied out of a guest gets on the host: the guest's read,
// write and execute bits for owner, group and others, less `umask`; never setuid, setgid
// or sticky, whatever the guest said.
mode_t host_file_mode(uint32_t guest_mode, mode_t umask);

// Copies `guest_path` out of the guest to `host_path`. The bytes go to a temporary file
// beside host_path; the guest may send no more than the size it announced (a frame past it
// fails the copy at once) and no less. A size larger than the host file system's free
// space fails before any data moves. The file is then given host_file_mode(), synced and
// renamed over host_path. On any error host_path is as it was (absent, or the old file)
// and the temporary file is gone.
Result<FileInfo> copy_out_of_guest(AgentClient& client, const std::string& guest_path,
                                   const std::string& host_path, mode_t umask);

}  // namespace dsec::agent

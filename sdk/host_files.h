// What the library reads of the host for a sandbox: the last lines of its VMM's log, and
// the process's umask (without umask(2), which would change it under the caller's other
// threads).
#pragma once

#include <sys/types.h>

#include <string>

#include "vmm/common/error.h"

namespace dsec::sdk::detail {

// The last `max_lines` lines of the file at `path` (at most its last 64 KiB); empty when
// it cannot be read.
std::string last_lines(const std::string& path, size_t max_lines);

// The calling process's umask, from the Umask line of /proc/self/status.
dsec::Result<mode_t> process_umask();

}  // namespace dsec::sdk::detail

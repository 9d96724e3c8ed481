// The last lines of a sandbox's log, kept when its VMM is lost.
#pragma once

#include <cstddef>
#include <string>

namespace dsec::pool {

// The last `max_lines` lines of the file at `path` within its last 8 KiB; empty when it
// cannot be read.
std::string log_tail(const std::string& path, size_t max_lines = 20);

}  // namespace dsec::pool

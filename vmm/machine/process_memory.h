// The VMM's own memory footprint, read from /proc/self/smaps.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::machine {

// Sum of the Rss of every mapping in `smaps` (the text of a /proc/PID/smaps) except those
// that overlap one of the `excluded` host address ranges [start, end), in KiB.
uint64_t rss_kib_excluding(std::string_view smaps,
                           const std::vector<std::pair<uint64_t, uint64_t>>& excluded);
// The same for this process.
Result<uint64_t> rss_kib_excluding(const std::vector<std::pair<uint64_t, uint64_t>>& excluded);

}  // namespace dsec::machine

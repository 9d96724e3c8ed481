// The host's memory as admission control sees it (/proc/meminfo's MemTotal and
// MemAvailable).
#pragma once

#include <cstdint>

#include "vmm/common/error.h"

namespace dsec::pool {

struct HostMemory {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};

Result<HostMemory> read_host_memory();

}  // namespace dsec::pool

#include "vmm/pool/host_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace dsec::pool {

Result<HostMemory> read_host_memory() {
  std::ifstream in("/proc/meminfo");
  if (!in) {
    return fail("cannot read /proc/meminfo");
  }
  HostMemory memory;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (!(fields >> key >> kib)) {
      continue;
    }
    if (key == "MemTotal:") {
      memory.total_bytes = kib * 1024;
    } else if (key == "MemAvailable:") {
      memory.available_bytes = kib * 1024;
    }
  }
  if (memory.total_bytes == 0 || memory.available_bytes > memory.total_bytes) {
    return fail("/proc/meminfo has no usable MemTotal and MemAvailable");
  }
  return memory;
}

}  // namespace dsec::pool

// Files in and out of a pool sandbox, through its agent (vmm/agent's client over its vsock
// socket), whole and in memory: the pool's API carries them as request and response bodies,
// up to kMaxPoolFileBytes. Bigger files go to the sandbox's vsock socket with dsec-vmm cp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "vmm/common/error.h"

namespace dsec::pool {

inline constexpr size_t kMaxPoolFileBytes = size_t{8} * 1024 * 1024;

struct GuestFile {
  std::string bytes;
  uint32_t mode = 0644;  // permission bits only (0777 at most)
};

// Writes `file` to `guest_path` (absolute) in the sandbox whose vsock socket is `vsock`.
Status write_guest_file(const std::string& vsock, const std::string& guest_path,
                        const GuestFile& file);
// Reads `guest_path`; a file larger than kMaxPoolFileBytes is refused before its bytes move.
Result<GuestFile> read_guest_file(const std::string& vsock, const std::string& guest_path);

}  // namespace dsec::pool

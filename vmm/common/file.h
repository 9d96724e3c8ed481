// Reading whole files (kernels, initrds) with errors that name the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec {

// An open regular file and its size.
struct OpenFile {
  UniqueFd fd;
  uint64_t size = 0;
};

// Opens `path` read-only; fails if it is not a regular file.
Result<OpenFile> open_regular_file(const std::string& path);
// Reads out.size() bytes from `fd` starting at `offset`; fails on a short read.
Status read_exact(int fd, uint64_t offset, std::span<uint8_t> out, const std::string& path);
// The whole file; fails if it is larger than `max_size` bytes.
Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_size);

}  // namespace dsec

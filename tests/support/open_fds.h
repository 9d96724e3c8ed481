// For tests: how many descriptors this process has open, to show that something left none
// behind.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iterator>

namespace dsec::test {

inline size_t open_fd_count() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

}  // namespace dsec::test

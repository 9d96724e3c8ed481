// The forms an allow list's rules take (allow_lists.cpp, pool_allow_list.cpp): a call
// allowed outright, or when its arguments match.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/seccomp/allow_lists.h"

namespace dsec::seccomp::rules {

inline SyscallRule allow(std::string_view syscall) {
  return {syscall, {}};
}
inline SyscallRule allow_if(std::string_view syscall, std::vector<ArgCondition> conditions) {
  return {syscall, std::move(conditions)};
}
inline ArgCondition equals(unsigned arg, uint64_t value) {
  return {arg, ~uint64_t{0}, value};
}
// The argument has none of `bits` set.
inline ArgCondition without(unsigned arg, uint64_t bits) {
  return {arg, bits, 0};
}
// The argument has every one of `bits` set.
inline ArgCondition with(unsigned arg, uint64_t bits) {
  return {arg, bits, bits};
}

// Memory as glibc's malloc and thread stacks use it; never executable.
inline std::vector<SyscallRule> memory() {
  return {
      allow("brk"),
      allow_if("mmap", {without(2, PROT_EXEC)}),
      allow_if("mprotect", {without(2, PROT_EXEC)}),
      allow("munmap"),
      allow("mremap"),
      allow("madvise"),
  };
}

// `list` with `more` after it.
inline std::vector<SyscallRule> joined(std::vector<SyscallRule> list,
                                       std::vector<SyscallRule> more) {
  list.insert(list.end(), std::make_move_iterator(more.begin()),
              std::make_move_iterator(more.end()));
  return list;
}

}  // namespace dsec::seccomp::rules

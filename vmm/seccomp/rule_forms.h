// The forms an allow list's rules take (allow_lists.cpp, pool_allow_list.cpp): a call
// allowed outright, or when its arguments match.
#pragma once

#include <cstdint>
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

}  // namespace dsec::seccomp::rules

// The programs installed side by side: dsec-vmm (the VMM, one process per sandbox) and
// dsec-vmm-pool (the pool daemon, which alone links OpenSSL). Each finds the other in its
// own directory, so a build tree and an installed prefix both work.
#pragma once

#include <string>
#include <string_view>

#include "vmm/common/error.h"

namespace dsec {

// The path of program `name` in the directory of this process's own executable
// (/proc/self/exe), checked to be executable.
Result<std::string> sibling_binary(std::string_view name);

}  // namespace dsec

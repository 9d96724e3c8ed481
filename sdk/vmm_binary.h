// Where the library finds the dsec-vmm binary it starts for each sandbox.
#pragma once

#include <string>

#include "vmm/common/error.h"

namespace dsec::sdk::detail {

struct VmmBinarySearch {
  std::string explicit_path;     // LaunchOptions::vmm_binary; when given, the only candidate
  std::string library_bindir;    // the bin directory beside this library's install location
  std::string installed_bindir;  // CMAKE_INSTALL_FULL_BINDIR at build time
  std::string path_env;          // $PATH
};

// The first executable regular file among: the explicit path (alone, when given), then
// dsec-vmm in library_bindir, in installed_bindir, and in each directory of path_env.
dsec::Result<std::string> find_vmm_binary(const VmmBinarySearch& search);

// The search this library makes: `explicit_path`, then the directories of its install.
VmmBinarySearch vmm_binary_search(const std::string& explicit_path);

}  // namespace dsec::sdk::detail

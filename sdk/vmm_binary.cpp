#include "sdk/vmm_binary.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#ifndef DSEC_SDK_INSTALLED_BINDIR
#error "the build defines DSEC_SDK_INSTALLED_BINDIR (CMAKE_INSTALL_FULL_BINDIR)"
#endif
#ifndef DSEC_SDK_LIBDIR_TO_BINDIR
#error "the build defines DSEC_SDK_LIBDIR_TO_BINDIR (the bin directory relative to the lib one)"
#endif

namespace dsec::sdk::detail {
namespace {

constexpr const char* kBinaryName = "dsec-vmm";

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The directory this library was loaded from (the shared library's, or the program's
// when linked statically, as the unit tests are).
std::string own_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&own_directory), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  std::error_code ec;
  const auto self = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::string() : self.parent_path().string();
}

}  // namespace

dsec::Result<std::string> find_vmm_binary(const VmmBinarySearch& search) {
  if (!search.explicit_path.empty()) {
    if (!is_executable_file(search.explicit_path)) {
      return fail("the dsec-vmm binary " + search.explicit_path + " is not an executable file",
                  "give LaunchOptions::vmm_binary the path of an installed dsec-vmm");
    }
    return search.explicit_path;
  }
  std::vector<std::string> dirs;
  for (const auto* dir : {&search.library_bindir, &search.installed_bindir}) {
    if (!dir->empty()) {
      dirs.push_back(*dir);
    }
  }
  std::string_view path = search.path_env;
  while (!path.empty()) {
    const auto colon = path.find(':');
    const auto entry = path.substr(0, colon);
    // An empty entry of PATH is the working directory: never searched here.
    if (!entry.empty()) {
      dirs.emplace_back(entry);
    }
    path = colon == std::string_view::npos ? std::string_view() : path.substr(colon + 1);
  }
  std::string searched;
  for (const auto& dir : dirs) {
    const auto candidate = dir + "/" + kBinaryName;
    if (is_executable_file(candidate)) {
      return candidate;
    }
    searched += searched.empty() ? dir : ", " + dir;
  }
  return fail("no dsec-vmm binary found (searched: " + searched + ")",
              "install dsec-vmm (cmake --install), put it in PATH, or give "
              "LaunchOptions::vmm_binary");
}

VmmBinarySearch vmm_binary_search(const std::string& explicit_path) {
  const auto own = own_directory();
  const char* path = std::getenv("PATH");
  return {.explicit_path = explicit_path,
          .library_bindir = own.empty() ? std::string()
                                        : (std::filesystem::path(own) / DSEC_SDK_LIBDIR_TO_BINDIR)
                                              .lexically_normal()
                                              .string(),
          .installed_bindir = DSEC_SDK_INSTALLED_BINDIR,
          .path_env = path ? path : ""};
}

}  // namespace dsec::sdk::detail

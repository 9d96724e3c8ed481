// Where the tests find the checkout and the build: the directories are compiled into one
// object (build_paths.cpp) and nowhere else, so that every other test object is the same
// in any checkout and a clean clone's build takes it from ccache.
#pragma once

#include <string>
#include <string_view>

namespace dsec::test {

// The checkout's root (CMake's PROJECT_SOURCE_DIR) followed by RELATIVE ("/docs/api.md").
std::string source_path(std::string_view relative);
// The build directory (PROJECT_BINARY_DIR) followed by RELATIVE ("/vmm/dsec-vmm").
std::string binary_path(std::string_view relative);

}  // namespace dsec::test

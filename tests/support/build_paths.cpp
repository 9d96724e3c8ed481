#include "tests/support/build_paths.h"

// Defined for this file alone (tests/CMakeLists.txt).
#if !defined(DSEC_SOURCE_DIR) || !defined(DSEC_BINARY_DIR)
#error "DSEC_SOURCE_DIR and DSEC_BINARY_DIR must be defined for build_paths.cpp"
#endif

namespace dsec::test {

// Only string literals here, so that a test's static constants built from these functions
// do not depend on the order in which their files are initialized.
std::string source_path(std::string_view relative) {
  return std::string(DSEC_SOURCE_DIR).append(relative);
}

std::string binary_path(std::string_view relative) {
  return std::string(DSEC_BINARY_DIR).append(relative);
}

}  // namespace dsec::test

#include "vmm/cli/default_image.h"

#include <unistd.h>

#include <cstdlib>

namespace dsec::cli {

Result<std::string> cache_root() {
  if (const char* c = std::getenv("DSEC_CACHE"); c && *c) {
    return std::string(c);
  }
  if (const char* h = std::getenv("HOME"); h && *h) {
    return std::string(h) + "/.cache/dsec-vmm";
  }
  return fail("cannot find the image cache: neither DSEC_CACHE nor HOME is set", "set DSEC_CACHE");
}

Result<ImagePaths> find_default_image() {
  std::string dir;
  if (const char* d = std::getenv("DSEC_IMAGE_DIR"); d && *d) {
    dir = d;
  } else if (auto root = cache_root(); root) {
    dir = *root + "/default";
  } else {
    return fail("cannot find the default image: neither DSEC_IMAGE_DIR nor HOME is set",
                "pass --kernel and --initrd");
  }
  ImagePaths paths{dir + "/kernel", dir + "/initrd"};
  if (::access(paths.kernel.c_str(), R_OK) != 0 || ::access(paths.initrd.c_str(), R_OK) != 0) {
    return fail("no default image in " + dir,
                "build it with images/build-image, or pass --kernel and --initrd");
  }
  return paths;
}

}  // namespace dsec::cli

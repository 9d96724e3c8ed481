#include "vmm/cli/default_image.h"

#include <unistd.h>

#include <cstdlib>

namespace dsec::cli {

Result<ImagePaths> find_default_image() {
  std::string dir;
  if (const char* d = std::getenv("DSEC_IMAGE_DIR"); d && *d) {
    dir = d;
  } else if (const char* c = std::getenv("DSEC_CACHE"); c && *c) {
    dir = std::string(c) + "/default";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/dsec-vmm/default";
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

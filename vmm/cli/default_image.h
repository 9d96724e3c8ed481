// Where the guest images are. The cache: $DSEC_CACHE, else ~/.cache/dsec-vmm. The default
// image (images/build-image): $DSEC_IMAGE_DIR, else <cache>/default, holding `kernel` and
// `initrd`.
#pragma once

#include <string>

#include "vmm/common/error.h"

namespace dsec::cli {

struct ImagePaths {
  std::string kernel;
  std::string initrd;
};

// The cache directory; an error when neither DSEC_CACHE nor HOME is set.
Result<std::string> cache_root();

Result<ImagePaths> find_default_image();

}  // namespace dsec::cli

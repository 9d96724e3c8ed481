// Where the default guest image (images/build-image) is: $DSEC_IMAGE_DIR, else
// $DSEC_CACHE/default, else ~/.cache/dsec-vmm/default, holding `kernel` and `initrd`.
#pragma once

#include <string>

#include "vmm/common/error.h"

namespace dsec::cli {

struct ImagePaths {
  std::string kernel;
  std::string initrd;
};

Result<ImagePaths> find_default_image();

}  // namespace dsec::cli

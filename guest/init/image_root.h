// Boots a sandbox image (docs/images.md): the initramfs is only the boot stage. dsec-init
// mounts the image read-only as the lower layer of an overlay whose upper layer is a tmpfs
// (or a scratch disk), moves /dev, /proc, /sys and /tmp into it and makes it the root;
// dsec-init, already running, then serves the agent from there. The image needs nothing
// of ours in it.
#pragma once

#include <string>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::init {

// What the kernel command line asks for:
//   dsec.root=DEV          the image's block device (the VMM gives /dev/vda)
//   dsec.rootfstype=TYPE   its file system; erofs when not given
//   dsec.upper=DEV         an ext4 scratch disk for the overlay's upper layer; a tmpfs
//                          when not given
struct ImageRoot {
  std::string device;  // empty: boot from the initramfs as before
  std::string fstype = "erofs";
  std::string upper_device;
};

// `args` is the command line split into words.
ImageRoot parse_image_root(const std::vector<std::string>& args);

// Mounts the overlay and switches root to it. On failure the root is still the initramfs.
Status switch_to_image_root(const ImageRoot& root);

}  // namespace dsec::init

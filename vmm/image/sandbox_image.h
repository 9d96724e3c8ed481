// Sandbox images (docs/images.md): read-only EROFS file systems that the guest mounts as
// the lower layer of a private overlay. Checks an image before a VM boots it, and lists
// the images in the cache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::image {

// The kernel command-line words that make dsec-init boot the image on /dev/vda (and, with
// a scratch disk, keep the overlay's upper layer on /dev/vdb).
inline constexpr const char* kImageRootArgs = "dsec.root=/dev/vda dsec.rootfstype=erofs";
inline constexpr const char* kScratchUpperArg = "dsec.upper=/dev/vdb";

// Fails, saying how to make one, unless `path` is a readable regular file that starts
// like an EROFS file system (its superblock's magic at byte 1024).
Status check_sandbox_image(const std::filesystem::path& path);

struct CachedImage {
  std::filesystem::path path;
  uint64_t bytes = 0;  // on disk (allocated blocks)
};

// The images under `cache_root` (normally ~/.cache/dsec-vmm): rootfs/*/rootfs.erofs
// (images/build-rootfs) and images/*.erofs (dsec-vmm image import), sorted by path.
std::vector<CachedImage> list_cached_images(const std::filesystem::path& cache_root);

}  // namespace dsec::image

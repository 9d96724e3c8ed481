// mkfs.erofs (Debian's erofs-utils), run on a finished tree to write the read-only image:
// lz4hc-compressed, as images/build-rootfs writes its own, with a fixed UUID and build time so
// that the same tree gives the same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>

#include "vmm/common/error.h"

namespace dsec::image {

struct ErofsOptions {
  std::string uuid;        // xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
  int64_t build_time = 0;  // the superblock's time (SOURCE_DATE_EPOCH); files keep theirs
  bool all_root = false;   // every file owned by root (a tree unpacked without root)
};

// Writes `image` from the directory `tree`. A stop request kills mkfs.erofs.
Status make_erofs_image(const std::filesystem::path& tree, const std::filesystem::path& image,
                        const ErofsOptions& options, const std::stop_token& stop);

// The UUID that ErofsOptions wants, made of the first 32 hex digits of `hex`.
std::string uuid_from_hex(std::string_view hex);

}  // namespace dsec::image

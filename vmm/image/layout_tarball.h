// An OCI image layout packed in a tar archive (skopeo's oci-archive:, `docker save` of
// Docker 25 or newer; plain, gzip or zstd), unpacked into a directory so that OciLayout can
// read it. Only what dsec-vmm reads comes out (oci-layout, index.json, blobs/sha256/<hex>, and
// manifest.json, which tells docker save's older format apart),
// and only as regular files: docker save's older files, links and anything else in the
// archive are passed over, so the archive cannot place anything else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stop_token>

#include "vmm/common/error.h"

namespace dsec::image {

// Unpacks `tarball` into the directory `dir_fd` (empty, private). Fails if the files it
// writes would exceed `max_bytes`.
Status unpack_layout_tarball(const std::filesystem::path& tarball, int dir_fd, uint64_t max_bytes,
                             const std::stop_token& stop);

}  // namespace dsec::image

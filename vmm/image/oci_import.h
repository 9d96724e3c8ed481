// `dsec-vmm image import`: a container image in OCI layout (a directory, or a tar archive of
// one) made into a sandbox image, the read-only EROFS file system that `run --image` boots
// (docs/images.md). The layout's chosen manifest is read (oci_layout.h), its layers applied
// bottom first onto a private tree with their whiteouts (layer_unpack.h), every blob checked
// against its digest and size, and the tree written with mkfs.erofs. Nothing of ours goes
// into the image: the agent is dsec-init, which runs from the initramfs and keeps serving
// once the image is the guest's root.
//
// Everything is made in a private working directory beside the target and the image renamed
// into place at the end, so a failed or interrupted import leaves nothing behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stop_token>
#include <string>

#include "vmm/common/error.h"
#include "vmm/image/layer_unpack.h"
#include "vmm/image/oci_layout.h"

namespace dsec::image {

struct ImportRequest {
  std::filesystem::path source;  // a layout directory or a tar archive of one
  // The image to write. Empty: <default_dir>/<name>.erofs, the name made of the image's ref
  // name and its manifest digest.
  std::filesystem::path out;
  std::filesystem::path default_dir;
  std::string manifest;  // a manifest digest or ref name; empty: chosen (OciLayout::choose)
  bool replace = false;  // replace an existing `out`
  // Give files the layers' owners (needs root); else every file is root's in the image.
  bool keep_owners = true;
  UnpackLimits limits;
};

struct ImportedImage {
  std::filesystem::path path;
  oci::ChosenImage image;
  uint64_t bytes = 0;  // the image file's size
  LayerStats totals;   // of all layers
};

// Called with each line of progress (for stderr).
using ImportProgress = std::function<void(const std::string&)>;

// A stop request (SIGINT, SIGTERM) ends the import with an "interrupted" error, having
// removed what it made.
Result<ImportedImage> import_oci_image(const ImportRequest& request, const ImportProgress& progress,
                                       const std::stop_token& stop);

// The file name an import without `out` gives the image: "<ref>-<12 hex>.erofs", the ref
// name's last component made safe ("ubuntu:24.04" -> "ubuntu-24.04"), or "<12 hex>.erofs".
std::string default_image_name(const oci::Descriptor& manifest);

}  // namespace dsec::image

// An OCI image layout directory (image-spec image-layout.md: oci-layout, index.json,
// blobs/sha256/...), as skopeo, umoci and `docker save` (Docker 25 or newer) write it, and
// the image in it that dsec-vmm imports: the manifest chosen through its index (nested
// indexes followed), with its config and layers, each blob verified as it is read.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"
#include "vmm/image/oci_json.h"

namespace dsec::image::oci {

// The image to unpack: its manifest's descriptor, platform and layers (bottom first).
struct ChosenImage {
  Descriptor manifest;
  Platform platform;
  std::vector<Descriptor> layers;
};

class OciLayout {
 public:
  // Checks that `dir` holds an OCI image layout (its oci-layout file) and reads its index:
  // every image manifest it lists, through nested indexes.
  static Result<OciLayout> open(const std::filesystem::path& dir);

  // The image to import: the one named by `wanted` (a manifest digest or a ref name), else
  // the only image manifest, else the only one for linux/amd64. When that leaves none or
  // several, the error lists them all. Fails unless the image's config says linux/amd64.
  Result<ChosenImage> choose(std::string_view wanted) const;

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<Descriptor>& manifests() const { return manifests_; }

 private:
  OciLayout(std::filesystem::path dir, std::vector<Descriptor> manifests)
      : dir_(std::move(dir)), manifests_(std::move(manifests)) {}
  Result<Descriptor> pick(std::string_view wanted) const;

  std::filesystem::path dir_;
  std::vector<Descriptor> manifests_;  // image manifests only, in index order
};

}  // namespace dsec::image::oci

// The JSON documents of an OCI image layout (image-spec v1.0/v1.1: oci-layout, image index,
// image manifest, image config), and Docker's equivalents that `docker save` and registries
// write, read strictly: every field dsec-vmm uses is checked for its type and form; fields it
// does not use are ignored. Parsing only: oci_layout.h finds and verifies the blobs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::image::oci {

// The media types dsec-vmm knows (image-spec media-types.md; Docker's manifest v2 schema 2).
inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kDockerManifestList =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kDockerManifest =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kDockerConfig = "application/vnd.docker.container.image.v1+json";

bool is_index_media_type(std::string_view media_type);
bool is_manifest_media_type(std::string_view media_type);
// A layer that is a tar archive, plain, gzip- or zstd-compressed (libarchive tells which
// from its first bytes).
bool is_layer_media_type(std::string_view media_type);

struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;  // may be empty
  // "linux/amd64", "linux/arm/v7".
  std::string text() const;
  bool is_linux_amd64() const { return os == "linux" && architecture == "amd64"; }
};

// A content descriptor: what a blob is, its digest and its size.
struct Descriptor {
  std::string media_type;
  std::string digest;  // "sha256:" and 64 lowercase hex digits (the only algorithm read)
  uint64_t size = 0;
  std::optional<Platform> platform;  // in an index only
  // io.containerd.image.name (docker save's), else org.opencontainers.image.ref.name, if any.
  std::string ref_name;

  // The digest's hex part, e.g. for blobs/sha256/<hex>.
  std::string_view hex() const { return std::string_view(digest).substr(7); }
  // "sha256:0123456789ab" (12 hex digits), for messages.
  std::string short_digest() const { return digest.substr(0, 19); }
};

// Fails unless `digest` is "sha256:" and 64 lowercase hex digits; `what` names it.
Status check_digest(std::string_view digest, const std::string& what);

// The oci-layout file: {"imageLayoutVersion": "1.0.0"}.
Status check_layout_file(std::string_view text);

// An image index (index.json, or a nested index blob): its manifests, in order.
Result<std::vector<Descriptor>> parse_index(std::string_view text, const std::string& what);

struct Manifest {
  Descriptor config;
  std::vector<Descriptor> layers;  // bottom first
};
Result<Manifest> parse_manifest(std::string_view text, const std::string& what);

// The os and architecture an image config says the image is for.
Result<Platform> parse_config_platform(std::string_view text, const std::string& what);

}  // namespace dsec::image::oci

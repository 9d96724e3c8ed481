#include "vmm/image/oci_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "vmm/common/json_object.h"

namespace dsec::image::oci {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 9> kLayerMediaTypes{
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

Status check_schema_version(JsonObject& object, const std::string& what) {
  const uint64_t version = DSEC_TRY(object.unsigned_int("schemaVersion"));
  if (version != 2) {
    return fail(fmt::format("{} has schemaVersion {}; dsec-vmm reads version 2", what, version));
  }
  return ok();
}

// The optional "mediaType" of a document must be one of `expected` (all three may be absent
// or "" in an OCI document; Docker's name their type).
Status check_document_media_type(JsonObject& object, const std::string& what,
                                 bool (*expected)(std::string_view)) {
  const auto media_type = DSEC_TRY(object.optional_string("mediaType"));
  if (media_type && !expected(*media_type)) {
    return fail(fmt::format("{} has mediaType \"{}\", which is not the kind of document expected",
                            what, *media_type));
  }
  return ok();
}

Result<Platform> parse_platform(const json& value, const std::string& what) {
  JsonObject object = DSEC_TRY(JsonObject::of(value, what));
  Platform platform;
  platform.os = DSEC_TRY(object.string("os"));
  platform.architecture = DSEC_TRY(object.string("architecture"));
  platform.variant = DSEC_TRY(object.optional_string("variant")).value_or("");
  return platform;
}

Result<Descriptor> parse_descriptor(const json& value, const std::string& what) {
  JsonObject object = DSEC_TRY(JsonObject::of(value, what));
  Descriptor descriptor;
  descriptor.media_type = DSEC_TRY(object.string("mediaType"));
  descriptor.digest = DSEC_TRY(object.string("digest"));
  DSEC_TRY(check_digest(descriptor.digest, "the digest of " + what));
  descriptor.size = DSEC_TRY(object.unsigned_int("size"));
  if (const auto platform = DSEC_TRY(object.optional_object("platform"))) {
    descriptor.platform = DSEC_TRY(parse_platform(*platform, "the platform of " + what));
  }
  if (const auto annotations = DSEC_TRY(object.optional_object("annotations"))) {
    // docker save puts the whole name in the second, and only the tag in the first.
    for (const char* key : {"io.containerd.image.name", "org.opencontainers.image.ref.name"}) {
      const auto it = annotations->find(key);
      if (it != annotations->end() && it->is_string() && descriptor.ref_name.empty()) {
        descriptor.ref_name = it->get<std::string>();
        // It is printed: no control characters (a terminal's escape sequences) from outside.
        std::ranges::replace_if(
            descriptor.ref_name,
            [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, '?');
      }
    }
  }
  return descriptor;
}

Result<std::vector<Descriptor>> parse_descriptors(JsonObject& object, const char* field,
                                                  const std::string& what, const char* each) {
  const json list = DSEC_TRY(object.array(field));
  std::vector<Descriptor> descriptors;
  descriptors.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    descriptors.push_back(
        DSEC_TRY(parse_descriptor(list[i], fmt::format("{} {} of {}", each, i + 1, what))));
  }
  return descriptors;
}

}  // namespace

bool is_index_media_type(std::string_view media_type) {
  return media_type == kOciIndex || media_type == kDockerManifestList;
}

bool is_manifest_media_type(std::string_view media_type) {
  return media_type == kOciManifest || media_type == kDockerManifest;
}

bool is_layer_media_type(std::string_view media_type) {
  return std::ranges::find(kLayerMediaTypes, media_type) != kLayerMediaTypes.end();
}

std::string Platform::text() const {
  return variant.empty() ? os + "/" + architecture : os + "/" + architecture + "/" + variant;
}

Status check_digest(std::string_view digest, const std::string& what) {
  constexpr std::string_view kAlgorithm = "sha256:";
  if (!digest.starts_with(kAlgorithm)) {
    const size_t colon = digest.find(':');
    if (colon != std::string_view::npos && colon > 0) {
      return fail(fmt::format("{} uses the {} algorithm; dsec-vmm verifies sha256 digests only",
                              what, digest.substr(0, colon)));
    }
    return fail(fmt::format("{} (\"{}\") is not a digest (sha256:<64 hex digits>)", what, digest));
  }
  const std::string_view hex = digest.substr(kAlgorithm.size());
  const bool well_formed = hex.size() == 64 && std::ranges::all_of(hex, [](char c) {
                             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                           });
  if (!well_formed) {
    return fail(
        fmt::format("{} (\"{}\") is not a sha256 digest (64 lowercase hex digits)", what, digest));
  }
  return ok();
}

Status check_layout_file(std::string_view text) {
  JsonObject object = DSEC_TRY(JsonObject::parse(text, "the oci-layout file"));
  const std::string version = DSEC_TRY(object.string("imageLayoutVersion"));
  if (!version.starts_with("1.")) {
    return fail(
        fmt::format("the oci-layout file says imageLayoutVersion {}; dsec-vmm reads 1.x", version));
  }
  return ok();
}

Result<std::vector<Descriptor>> parse_index(std::string_view text, const std::string& what) {
  JsonObject object = DSEC_TRY(JsonObject::parse(text, what));
  DSEC_TRY(check_schema_version(object, what));
  DSEC_TRY(check_document_media_type(object, what, is_index_media_type));
  return parse_descriptors(object, "manifests", what, "manifest");
}

Result<Manifest> parse_manifest(std::string_view text, const std::string& what) {
  JsonObject object = DSEC_TRY(JsonObject::parse(text, what));
  DSEC_TRY(check_schema_version(object, what));
  DSEC_TRY(check_document_media_type(object, what, is_manifest_media_type));
  Manifest manifest;
  manifest.config = DSEC_TRY(
      parse_descriptor(DSEC_TRY(object.object("config")), "the config descriptor of " + what));
  if (manifest.config.media_type != kOciConfig && manifest.config.media_type != kDockerConfig) {
    return fail(
        fmt::format("the config of {} has mediaType \"{}\": not a container image "
                    "(an artifact of another kind?)",
                    what, manifest.config.media_type));
  }
  manifest.layers = DSEC_TRY(parse_descriptors(object, "layers", what, "layer"));
  for (size_t i = 0; i < manifest.layers.size(); ++i) {
    if (!is_layer_media_type(manifest.layers[i].media_type)) {
      return fail(
          fmt::format("layer {} of {} has mediaType \"{}\"; dsec-vmm unpacks tar layers, "
                      "plain or compressed with gzip or zstd",
                      i + 1, what, manifest.layers[i].media_type));
    }
  }
  return manifest;
}

Result<Platform> parse_config_platform(std::string_view text, const std::string& what) {
  const json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return fail(what + " is not valid JSON");
  }
  return parse_platform(value, what);
}

}  // namespace dsec::image::oci

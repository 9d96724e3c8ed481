// libFuzzer target: hostile bytes as the JSON documents of an OCI image layout
// (vmm/image/oci_json): the oci-layout file, an index, a manifest, a config. Each parser must
// refuse or accept without crashing, and what it accepts must hold what the importer relies
// on: digests in their canonical sha256 form (they become file names under blobs/sha256/),
// and layers of the media types it unpacks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "vmm/image/oci_json.h"

namespace {

namespace oci = dsec::image::oci;

void check(const oci::Descriptor& descriptor) {
  if (!oci::check_digest(descriptor.digest, "fuzz") || descriptor.hex().size() != 64 ||
      descriptor.hex().find('/') != std::string_view::npos) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)oci::check_layout_file(text);
  if (const auto index = oci::parse_index(text, "index.json")) {
    for (const oci::Descriptor& manifest : *index) {
      check(manifest);
      if (manifest.platform) {
        (void)manifest.platform->text();
      }
    }
  }
  if (const auto manifest = oci::parse_manifest(text, "the manifest")) {
    check(manifest->config);
    for (const oci::Descriptor& layer : manifest->layers) {
      check(layer);
      if (!oci::is_layer_media_type(layer.media_type)) {
        std::abort();
      }
    }
  }
  (void)oci::parse_config_platform(text, "the config");
  return 0;
}

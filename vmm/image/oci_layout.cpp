#include "vmm/image/oci_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "vmm/common/file.h"
#include "vmm/image/oci_blob.h"

namespace dsec::image::oci {
namespace {

// Bounds on what a hostile layout can make dsec-vmm read or follow.
constexpr uint64_t kMaxDocumentBytes = 4 << 20;  // index.json, a manifest, a config
constexpr int kMaxIndexDepth = 4;
constexpr size_t kMaxManifests = 4096;

Result<std::string> read_layout_file(const std::filesystem::path& path) {
  OpenFile file = DSEC_TRY(open_regular_file(path.string()));
  if (file.size > kMaxDocumentBytes) {
    return fail(fmt::format("{} is {} bytes; dsec-vmm reads at most {}", path.string(), file.size,
                            kMaxDocumentBytes));
  }
  std::string text(file.size, '\0');
  DSEC_TRY(read_exact(file.fd.get(), 0,
                      std::span(reinterpret_cast<uint8_t*>(text.data()), text.size()),
                      path.string()));
  return text;
}

// The image manifests of an index, in order, following nested indexes; a nested manifest
// without a ref name takes its index's.
Status collect_manifests(const std::filesystem::path& dir, const std::vector<Descriptor>& index,
                         const std::string& outer_ref, int depth, std::vector<Descriptor>& out) {
  for (const Descriptor& descriptor : index) {
    Descriptor entry = descriptor;
    if (entry.ref_name.empty()) {
      entry.ref_name = outer_ref;
    }
    if (is_manifest_media_type(entry.media_type)) {
      if (out.size() == kMaxManifests) {
        return fail(fmt::format("the layout lists more than {} manifests", kMaxManifests));
      }
      out.push_back(std::move(entry));
    } else if (is_index_media_type(entry.media_type)) {
      if (depth == kMaxIndexDepth) {
        return fail(fmt::format("the layout nests indexes more than {} deep", kMaxIndexDepth));
      }
      const std::string text =
          DSEC_TRY(read_small_blob(dir, entry, "a nested index", kMaxDocumentBytes));
      const auto nested = DSEC_TRY(parse_index(text, "the index " + entry.short_digest()));
      DSEC_TRY(collect_manifests(dir, nested, entry.ref_name, depth + 1, out));
    }
    // Anything else (an artifact, a signature) is not an image: passed over.
  }
  return ok();
}

std::string describe(const Descriptor& manifest) {
  std::string line = "  " + manifest.digest;
  line += manifest.platform ? "  " + manifest.platform->text() : "  (no platform)";
  if (!manifest.ref_name.empty()) {
    line += "  " + manifest.ref_name;
  }
  return line;
}

std::string describe_all(const std::vector<Descriptor>& manifests) {
  std::string lines;
  for (const Descriptor& manifest : manifests) {
    lines += "\n" + describe(manifest);
  }
  return lines;
}

}  // namespace

Result<OciLayout> OciLayout::open(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir / "oci-layout", ec)) {
    const bool legacy_docker = std::filesystem::exists(dir / "manifest.json", ec);
    return fail(
        "it is not an OCI image layout (it has no oci-layout file)",
        legacy_docker
            ? "it looks like `docker save` of Docker 24 or older: convert it with `skopeo copy "
              "docker-archive:FILE oci:DIR`, or save it with Docker 25 or newer"
            : "give a directory or tar archive in OCI layout, as `skopeo copy docker://IMAGE "
              "oci:DIR`, umoci or `docker save` (Docker 25 or newer) write it");
  }
  DSEC_TRY(check_layout_file(DSEC_TRY(read_layout_file(dir / "oci-layout"))));
  const auto index =
      DSEC_TRY(parse_index(DSEC_TRY(read_layout_file(dir / "index.json")), "index.json"));
  std::vector<Descriptor> manifests;
  DSEC_TRY(collect_manifests(dir, index, "", 0, manifests));
  if (manifests.empty()) {
    return fail("its index.json lists no image manifest");
  }
  return OciLayout(dir, std::move(manifests));
}

Result<Descriptor> OciLayout::pick(std::string_view wanted) const {
  std::vector<Descriptor> candidates;
  for (const Descriptor& manifest : manifests_) {
    if (wanted.empty() || manifest.digest == wanted || manifest.ref_name == wanted) {
      candidates.push_back(manifest);
    }
  }
  if (candidates.empty()) {
    return fail(
        fmt::format("no manifest in the layout is {}; it has:{}", wanted, describe_all(manifests_)),
        "give --manifest one of these digests or names");
  }
  if (candidates.size() == 1) {
    return candidates.front();
  }
  std::vector<Descriptor> amd64;
  std::ranges::copy_if(candidates, std::back_inserter(amd64), [](const Descriptor& manifest) {
    return manifest.platform && manifest.platform->is_linux_amd64();
  });
  if (amd64.size() == 1) {
    return amd64.front();
  }
  return fail(fmt::format("the layout holds {} images{}, and {} of them for linux/amd64:{}",
                          candidates.size(), wanted.empty() ? "" : " named " + std::string(wanted),
                          amd64.size(), describe_all(candidates)),
              "pick one with --manifest DIGEST");
}

Result<ChosenImage> OciLayout::choose(std::string_view wanted) const {
  ChosenImage image;
  image.manifest = DSEC_TRY(pick(wanted));
  const std::string what = "the manifest " + image.manifest.short_digest();
  const Manifest manifest = DSEC_TRY(parse_manifest(
      DSEC_TRY(read_small_blob(dir_, image.manifest, "the image manifest", kMaxDocumentBytes)),
      what));
  image.platform = DSEC_TRY(parse_config_platform(
      DSEC_TRY(read_small_blob(dir_, manifest.config, "the image config", kMaxDocumentBytes)),
      "the image config " + manifest.config.short_digest()));
  if (!image.platform.is_linux_amd64()) {
    return fail(
        fmt::format("the image is for {}; dsec-vmm runs linux/amd64 guests", image.platform.text()),
        "import the image's linux/amd64 variant (docker pull --platform linux/amd64, "
        "skopeo copy --override-arch amd64)");
  }
  if (manifest.layers.empty()) {
    return fail(what + " lists no layers: there is nothing to boot");
  }
  image.layers = manifest.layers;
  return image;
}

}  // namespace dsec::image::oci

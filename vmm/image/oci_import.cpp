#include "vmm/image/oci_import.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "vmm/common/unique_fd.h"
#include "vmm/image/layout_tarball.h"
#include "vmm/image/mkfs_erofs.h"
#include "vmm/image/oci_blob.h"
#include "vmm/image/private_dir.h"
#include "vmm/image/tar_stream.h"

namespace dsec::image {
namespace {

std::string mib(uint64_t bytes) {
  if (bytes < (1 << 20)) {
    return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1 << 10));
  }
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string count(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string compression_of(std::string_view media_type) {
  if (media_type.ends_with("gzip")) {
    return "tar+gzip";
  }
  return media_type.ends_with("zstd") ? "tar+zstd" : "tar";
}

Status check_target(const std::filesystem::path& out, bool replace) {
  std::error_code ec;
  if (std::filesystem::symlink_status(out, ec).type() != std::filesystem::file_type::not_found &&
      !replace) {
    return fail(out.string() + " exists", "give --force to replace it, or another --out");
  }
  return ok();
}

// The layout directory to read: the source itself, or the source tarball unpacked into the
// working directory.
Result<std::filesystem::path> layout_dir(const ImportRequest& request, const PrivateDir& work,
                                         const ImportProgress& progress,
                                         const std::stop_token& stop) {
  std::error_code ec;
  const auto status = std::filesystem::status(request.source, ec);
  if (std::filesystem::is_directory(status)) {
    return request.source;
  }
  if (!std::filesystem::is_regular_file(status)) {
    return fail(request.source.string() + " does not exist or is neither a directory nor a file",
                "give an OCI image layout: a directory, or a tar archive of one");
  }
  progress(fmt::format("unpacking the layout from {} ({})", request.source.string(),
                       mib(std::filesystem::file_size(request.source, ec))));
  if (::mkdirat(work.fd(), "layout", 0700) != 0) {
    return fail_errno("cannot create " + (work.path() / "layout").string(), errno);
  }
  const UniqueFd dir(::openat(work.fd(), "layout", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    return fail_errno("cannot open " + (work.path() / "layout").string(), errno);
  }
  DSEC_TRY(unpack_layout_tarball(request.source, dir.get(), request.limits.max_total_bytes, stop));
  return work.path() / "layout";
}

// One layer onto the tree. When the layer cannot be read, its digest is checked first: a
// blob that is not what its descriptor says is the reason to give.
Result<LayerStats> apply_layer(TreeBuilder& tree, const std::filesystem::path& layout,
                               const oci::Descriptor& layer, const std::string& what,
                               const std::stop_token& stop) {
  oci::BlobReader blob = DSEC_TRY(oci::BlobReader::open(layout, layer, what));
  auto applied = [&]() -> Result<LayerStats> {
    TarStream stream = DSEC_TRY(TarStream::from_blob(blob));
    return tree.apply_layer(stream, stop);
  }();
  const Status verified = blob.finish();
  if (!verified) {
    return std::unexpected(verified.error());
  }
  return applied;
}

void add(LayerStats& total, const LayerStats& layer) {
  total.entries += layer.entries;
  total.bytes += layer.bytes;
  total.whiteouts += layer.whiteouts;
  total.skipped_devices += layer.skipped_devices;
  total.skipped_xattrs += layer.skipped_xattrs;
}

std::string describe(const LayerStats& stats) {
  std::string text =
      fmt::format("{}, {} of files", count(stats.entries, "entry", "entries"), mib(stats.bytes));
  if (stats.whiteouts > 0) {
    text += ", " + count(stats.whiteouts, "whiteout", "whiteouts");
  }
  if (stats.skipped_devices > 0) {
    text += ", " +
            count(stats.skipped_devices, "device node or socket", "device nodes or sockets") +
            " skipped";
  }
  if (stats.skipped_xattrs > 0) {
    text += ", " + count(stats.skipped_xattrs, "extended attribute", "extended attributes") +
            " not kept";
  }
  return text;
}

// fsync, then the rename into place (refused if the target appeared meanwhile, unless
// replacing), then fsync of the directory.
Status install_image(const std::filesystem::path& built, const std::filesystem::path& out,
                     bool replace) {
  {
    const UniqueFd fd(::open(built.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd || ::fchmod(fd.get(), 0444) != 0 || ::fsync(fd.get()) != 0) {
      return fail_errno("cannot finish " + built.string(), errno, "is the disk full?");
    }
  }
  int rc = replace ? ::rename(built.c_str(), out.c_str())
                   : ::renameat2(AT_FDCWD, built.c_str(), AT_FDCWD, out.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && errno == EINVAL && !replace) {
    // A file system without RENAME_NOREPLACE (9p, some NFS): checked just before instead.
    DSEC_TRY(check_target(out, replace));
    rc = ::rename(built.c_str(), out.c_str());
  }
  if (rc != 0) {
    if (errno == EEXIST) {
      return check_target(out, replace);
    }
    return fail_errno(fmt::format("cannot rename {} to {}", built.string(), out.string()), errno);
  }
  const std::filesystem::path dir = out.parent_path().empty() ? "." : out.parent_path();
  const UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd || ::fsync(dir_fd.get()) != 0) {
    return fail_errno("fsync of " + dir.string(), errno,
                      "the image is complete but may not survive a power cut");
  }
  return ok();
}

}  // namespace

Result<ImportedImage> import_oci_image(const ImportRequest& request, const ImportProgress& progress,
                                       const std::stop_token& stop) {
  if (!request.out.empty()) {
    DSEC_TRY(check_target(request.out, request.replace));
  }
  const std::filesystem::path out_dir =
      request.out.empty() ? request.default_dir : request.out.parent_path();
  const std::string out_name =
      request.out.empty() ? std::string("image") : request.out.filename().string();
  const PrivateDir work =
      DSEC_TRY(PrivateDir::create(out_dir.empty() ? "." : out_dir, "." + out_name + ".import"));

  const std::filesystem::path layout_path = DSEC_TRY(layout_dir(request, work, progress, stop));
  // Errors about the layout's contents name the source the user gave (for a tar archive,
  // the files read are in the working directory).
  const auto in_source = [&request](const Error& error) {
    return std::unexpected(error.with_context(request.source.string()));
  };
  auto layout = oci::OciLayout::open(layout_path);
  if (!layout) {
    return in_source(layout.error());
  }
  ImportedImage imported;
  auto chosen = layout->choose(request.manifest);
  if (!chosen) {
    return in_source(chosen.error());
  }
  imported.image = std::move(*chosen);
  imported.path = request.out.empty()
                      ? request.default_dir / default_image_name(imported.image.manifest)
                      : request.out;
  if (request.out.empty()) {
    DSEC_TRY(check_target(imported.path, request.replace));
  }
  const auto& layers = imported.image.layers;
  uint64_t packed = 0;
  for (const auto& layer : layers) {
    packed += layer.size;
  }
  const auto& manifest = imported.image.manifest;
  progress(fmt::format(
      "image {} ({}{}): {} layers, {}", manifest.short_digest(), imported.image.platform.text(),
      manifest.ref_name.empty() ? "" : ", " + manifest.ref_name, layers.size(), mib(packed)));

  if (::mkdirat(work.fd(), "tree", 0700) != 0) {
    return fail_errno("cannot create " + (work.path() / "tree").string(), errno);
  }
  const UniqueFd root(::openat(work.fd(), "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    return fail_errno("cannot open " + (work.path() / "tree").string(), errno);
  }
  TreeBuilder tree(root.get(), request.limits, request.keep_owners);
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string what = fmt::format("layer {} of {}", i + 1, layers.size());
    progress(fmt::format("{} {}: {}, {}", what, layers[i].short_digest(), mib(layers[i].size),
                         compression_of(layers[i].media_type)));
    const auto stats = apply_layer(tree, layout_path, layers[i], what, stop);
    if (!stats) {
      return stop.stop_requested() ? std::unexpected(stats.error()) : in_source(stats.error());
    }
    progress(fmt::format("{}: {}", what, describe(*stats)));
    add(imported.totals, *stats);
  }
  DSEC_TRY(tree.finish());

  progress(
      fmt::format("writing the EROFS image (lz4hc) of {} of files", mib(imported.totals.bytes)));
  const std::filesystem::path built = work.path() / "image.erofs";
  DSEC_TRY(make_erofs_image(work.path() / "tree", built,
                            ErofsOptions{.uuid = uuid_from_hex(manifest.hex()),
                                         .build_time = tree.newest_mtime(),
                                         .all_root = !request.keep_owners},
                            stop));
  std::error_code ec;
  imported.bytes = std::filesystem::file_size(built, ec);
  DSEC_TRY(install_image(built, imported.path, request.replace));
  return imported;
}

std::string default_image_name(const oci::Descriptor& manifest) {
  const std::string digest(manifest.hex().substr(0, 12));
  std::string_view ref = manifest.ref_name;
  if (const size_t slash = ref.rfind('/'); slash != std::string_view::npos) {
    ref.remove_prefix(slash + 1);
  }
  std::string name;
  for (const char c : ref) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    name += safe ? c : '-';
  }
  while (name.starts_with('.') || name.starts_with('-')) {
    name.erase(0, 1);
  }
  return name.empty() ? digest + ".erofs" : name + "-" + digest + ".erofs";
}

}  // namespace dsec::image

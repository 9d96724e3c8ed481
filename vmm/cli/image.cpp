// `dsec-vmm image list`: the sandbox images in the cache; `dsec-vmm image import`: a sandbox
// image made from a container image in OCI layout (docs/images.md).
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stop_token>
#include <string>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/default_image.h"
#include "vmm/image/oci_import.h"
#include "vmm/image/sandbox_image.h"
#include "vmm/io/signal_watcher.h"

namespace dsec::cli {
namespace {

int list_main() {
  auto root = cache_root();
  if (!root) {
    (void)std::fprintf(stderr, "dsec-vmm image list: %s\n", root.error().message().c_str());
    return 1;
  }
  const auto images = image::list_cached_images(*root);
  if (images.empty()) {
    (void)std::fprintf(stderr,
                       "dsec-vmm image list: no images in %s (build one with "
                       "images/build-rootfs, or import one with dsec-vmm image import)\n",
                       root->c_str());
    return 0;
  }
  for (const auto& image : images) {
    fmt::print("{:>9.1f} MiB  {}\n", static_cast<double>(image.bytes) / (1 << 20),
               image.path.string());
  }
  return 0;
}

struct ImportOptions {
  std::string source;
  std::string out;
  std::string manifest;
  bool force = false;
};

void say(const std::string& line) {
  (void)std::fprintf(stderr, "dsec-vmm image import: %s\n", line.c_str());
}

int import_main(const ImportOptions& options) {
  image::ImportRequest request{.source = options.source,
                               .out = options.out,
                               .default_dir = {},
                               .manifest = options.manifest,
                               .replace = options.force,
                               .keep_owners = ::geteuid() == 0,
                               .limits = {}};
  if (request.out.empty()) {
    auto root = cache_root();
    if (!root) {
      say("error: " + root.error().message() + " (or give --out)");
      return 1;
    }
    request.default_dir = std::filesystem::path(*root) / "images";
    std::error_code ec;
    std::filesystem::create_directories(request.default_dir, ec);
    if (ec) {
      say(fmt::format("error: cannot create {}: {}", request.default_dir.string(), ec.message()));
      return 1;
    }
  }
  if (!request.keep_owners) {
    say("not running as root: the layers' file owners cannot be kept; every file of the image "
        "will be root's");
  }
  // SIGINT, SIGTERM and SIGHUP stop the import, which then removes what it made.
  const io::BlockedSignals signals{SIGINT, SIGTERM, SIGHUP};
  std::stop_source stop;
  auto watcher = io::SignalWatcher::start(signals, [&stop](int) { stop.request_stop(); });
  if (!watcher) {
    say("error: " + watcher.error().message());
    return 1;
  }
  const auto imported = image::import_oci_image(request, say, stop.get_token());
  if (!imported) {
    say("error: " + imported.error().message());
    return stop.stop_requested() ? 130 : 1;
  }
  say(fmt::format("wrote {} ({:.1f} MiB)", imported->path.string(),
                  static_cast<double>(imported->bytes) / (1 << 20)));
  fmt::print("image={}\n", imported->path.string());
  return 0;
}

}  // namespace

void add_image_command(CLI::App& app, CommandAction& action) {
  CLI::App* image = app.add_subcommand("image", "Sandbox images for run --image");
  image->require_subcommand(1);
  CLI::App* list = image->add_subcommand(
      "list",
      "List the sandbox images in the cache ($DSEC_CACHE, else ~/.cache/dsec-vmm) "
      "with their size on disk");
  list->callback([&action] { action = [] { return list_main(); }; });

  auto options = std::make_shared<ImportOptions>();
  CLI::App* import = image->add_subcommand(
      "import",
      "Make a sandbox image (read-only EROFS, for run --image) from a container image in OCI "
      "layout: a directory or a tar archive of one, as skopeo, umoci and docker save (Docker 25 "
      "or newer) write them. Its layers are applied in order with their whiteouts and every "
      "blob is checked against its sha256 digest; no registry is contacted. Prints image=PATH "
      "on stdout, progress on stderr.");
  import->add_option("SOURCE", options->source, "The OCI layout: a directory or a tar archive")
      ->required();
  import->add_option("--out", options->out,
                     "The image file to write (default: <cache>/images/<name>-<digest>.erofs, "
                     "which image list shows)");
  import->add_flag("--force", options->force, "Replace the image file if it exists");
  import->add_option("--manifest", options->manifest,
                     "The image to import, by manifest digest or ref name, when the layout "
                     "holds several (default: the only one, else the only linux/amd64 one)");
  import->callback([&action, options] { action = [options] { return import_main(*options);
};
}  // namespace dsec::cli
);
}

}  // namespace dsec::cli

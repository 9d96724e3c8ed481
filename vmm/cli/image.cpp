// `dsec-vmm image list`: the sandbox images in the cache (docs/images.md).
#include <fmt/format.h>

#include <cstdio>

#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/default_image.h"
#include "vmm/image/sandbox_image.h"

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
                       "images/build-rootfs)\n",
                       root->c_str());
    return 0;
  }
  for (const auto& image : images) {
    fmt::print("{:>9.1f} MiB  {}\n", static_cast<double>(image.bytes) / (1 << 20),
               image.path.string());
  }
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
}

}  // namespace dsec::cli

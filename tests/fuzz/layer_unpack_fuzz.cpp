// libFuzzer target: hostile bytes as container image layers (vmm/image/layer_unpack). The
// input is read as a tar archive (plain, gzip or zstd) and applied twice, as two layers (so
// that the second one's whiteouts meet the first one's files), onto a tree in a fresh private
// directory, with small limits; then the directories get their modes and the tree is removed.
// Whatever the archive holds, nothing may appear outside the tree: a sentinel directory
// beside it must stay empty, and the tree must go without a trace.
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>

#include "vmm/image/layer_unpack.h"
#include "vmm/image/private_dir.h"
#include "vmm/image/tar_stream.h"

namespace {

namespace fs = std::filesystem;

// The fuzzer's own directory: the trees are made in it, beside the sentinel "outside". It
// is removed at exit (registered after `base` is made, so it runs before base's destructor).
const fs::path& base_dir() {
  static const fs::path base = [] {
    std::string pattern = (fs::temp_directory_path() / "dsec-layer-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    fs::create_directory(fs::path(pattern) / "outside");
    return fs::path(pattern);
  }();
  [[maybe_unused]] static const bool removed_at_exit = std::atexit([] {
                                                         std::error_code ec;
                                                         fs::remove_all(base_dir(), ec);
                                                       }) == 0;
  return base;
}

// The names in `dir`, "." and ".." aside.
size_t count_entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& base = base_dir();
  {
    auto tree = dsec::image::PrivateDir::create(base, "tree");
    if (!tree) std::abort();
    dsec::image::TreeBuilder builder(
        tree->fd(), {.max_file_bytes = 1 << 20, .max_total_bytes = 4 << 20, .max_entries = 2000},
        ::geteuid() == 0);
    for (int layer = 0; layer < 2; ++layer) {
      auto stream = dsec::image::TarStream::from_memory(std::span(data, size), "the layer");
      if (!stream) break;
      (void)builder.apply_layer(*stream, {});
    }
    (void)builder.finish();
  }
  // Only the sentinel is left, and it is empty.
  if (count_entries(base) != 1 || count_entries(base / "outside") != 0) std::abort();
  return 0;
}

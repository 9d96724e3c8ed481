#include "vmm/image/sandbox_image.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "vmm/common/unique_fd.h"

namespace dsec::image {
namespace {

// EROFS's on-disk superblock (fs/erofs/erofs_fs.h): at byte 1024, little-endian: the
// magic, then at +12 the block size's log2 and at +36 the file system's size in blocks.
constexpr off_t kErofsSuperblockOffset = 1024;
constexpr std::array<uint8_t, 4> kErofsMagic{0xe2, 0xe1, 0xf5, 0xe0};  // 0xE0F5E1E2
constexpr size_t kBlockSizeBitsAt = 12;
constexpr size_t kBlocksAt = 36;
constexpr size_t kSuperblockRead = 40;
// The guest kernel (6.1) reads EROFS with 4 KiB blocks only.
constexpr uint8_t kBlockSizeBits = 12;

constexpr const char* kMakeOne =
    "give an image made by images/build-rootfs or dsec-vmm image import";

}  // namespace

Status check_sandbox_image(const std::filesystem::path& path) {
  const std::string what = "--image " + path.string();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return fail_errno(what, errno, kMakeOne);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno(what, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(what + " is not a regular file", kMakeOne);
  }
  std::array<uint8_t, kSuperblockRead> superblock{};
  const ssize_t n = ::pread(fd.get(), superblock.data(), superblock.size(), kErofsSuperblockOffset);
  if (n < 0) {
    return fail_errno(what, errno);
  }
  if (static_cast<size_t>(n) != superblock.size() ||
      !std::equal(kErofsMagic.begin(), kErofsMagic.end(), superblock.begin())) {
    return fail(what + " is not an EROFS file system (no EROFS superblock at byte 1024)", kMakeOne);
  }
  // What the guest would otherwise find only when it mounts the image, or later.
  const uint8_t block_size_bits = superblock[kBlockSizeBitsAt];
  if (block_size_bits != kBlockSizeBits) {
    return fail(fmt::format("{} has a damaged EROFS superblock, or one for blocks other than "
                            "the 4096 bytes the guest kernel reads (its block size's log2 is {})",
                            what, block_size_bits),
                kMakeOne);
  }
  uint32_t blocks = 0;
  for (size_t i = 0; i < 4; ++i) {
    blocks |= static_cast<uint32_t>(superblock[kBlocksAt + i]) << (8 * i);
  }
  const uint64_t needed = uint64_t{blocks} << kBlockSizeBits;
  if (static_cast<uint64_t>(st.st_size) < needed) {
    return fail(fmt::format("{} is truncated: it is {} bytes, and its EROFS superblock says {}",
                            what, st.st_size, needed),
                "copy the image again");
  }
  return ok();
}

std::vector<CachedImage> list_cached_images(const std::filesystem::path& cache_root) {
  namespace fs = std::filesystem;
  std::vector<CachedImage> images;
  auto add = [&images](const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      images.push_back({path, static_cast<uint64_t>(st.st_blocks) * 512});
    }
  };
  std::error_code ec;
  for (fs::directory_iterator it(cache_root / "rootfs", ec), end; !ec && it != end;
       it.increment(ec)) {
    add(it->path() / "rootfs.erofs");
  }
  ec.clear();
  for (fs::directory_iterator it(cache_root / "images", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() == ".erofs") {
      add(it->path());
    }
  }
  std::ranges::sort(images, {}, &CachedImage::path);
  return images;
}

}  // namespace dsec::image

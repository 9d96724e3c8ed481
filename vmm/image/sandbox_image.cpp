#include "vmm/image/sandbox_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "vmm/common/unique_fd.h"

namespace dsec::image {
namespace {

// EROFS's on-disk superblock (fs/erofs/erofs_fs.h): at byte 1024, a little-endian magic.
constexpr off_t kErofsSuperblockOffset = 1024;
constexpr std::array<uint8_t, 4> kErofsMagic{0xe2, 0xe1, 0xf5, 0xe0};  // 0xE0F5E1E2

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
  std::array<uint8_t, 4> magic{};
  const ssize_t n = ::pread(fd.get(), magic.data(), magic.size(), kErofsSuperblockOffset);
  if (n < 0) {
    return fail_errno(what, errno);
  }
  if (static_cast<size_t>(n) != magic.size() || magic != kErofsMagic) {
    return fail(what + " is not an EROFS file system (no EROFS superblock at byte 1024)", kMakeOne);
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

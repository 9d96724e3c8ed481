// Sandbox images on the host (vmm/image): the EROFS check before a boot, the cache
// listing, and `dsec-vmm run --image` / `image list` on bad input. No KVM: the image is
// checked before any VM exists.
#include "vmm/image/sandbox_image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

// A file of `size` bytes; when `erofs`, with the start of an EROFS superblock at byte 1024
// (as much of it as fits): the magic, 4096-byte blocks (log2 at +12), and `blocks` blocks
// (at +36), by default as many as the file holds.
void write_file(const std::filesystem::path& path, size_t size, bool erofs, uint8_t block_bits = 12,
                int64_t blocks = -1) {
  std::string bytes(size, '\x5a');
  if (erofs) {
    std::string superblock(40, '\0');
    superblock.replace(0, 4, "\xe2\xe1\xf5\xe0");
    superblock[12] = static_cast<char>(block_bits);
    const auto count = static_cast<uint32_t>(blocks < 0 ? size / 4096 : blocks);
    for (int i = 0; i < 4; ++i) {
      superblock[36 + i] = static_cast<char>(count >> (8 * i));
    }
    bytes.replace(1024, std::min(superblock.size(), size - 1024), superblock, 0,
                  std::min(superblock.size(), size - 1024));
  }
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(SandboxImage, AnEroFsSuperblockPassesTheCheck) {
  TempDir dir;
  write_file(dir.path() / "image.erofs", 8192, true);
  EXPECT_TRUE(image::check_sandbox_image(dir.path() / "image.erofs"));
}

TEST(SandboxImage, AFileThatIsNotEroFsIsRefusedWithHowToMakeAnImage) {
  TempDir dir;
  write_file(dir.path() / "random", 8192, false);
  write_file(dir.path() / "short", 1026, true);   // ends inside the magic
  write_file(dir.path() / "header", 1060, true);  // ends inside the superblock
  for (const char* name : {"random", "short", "header"}) {
    auto checked = image::check_sandbox_image(dir.path() / name);
    ASSERT_FALSE(checked) << name;
    EXPECT_THAT(checked.error().message(),
                AllOf(HasSubstr(name), HasSubstr("is not an EROFS file system"),
                      HasSubstr("images/build-rootfs")));
  }
}

TEST(SandboxImage, ADamagedOrTruncatedEroFsImageIsRefusedBeforeTheGuestMountsIt) {
  TempDir dir;
  write_file(dir.path() / "damaged", 8192, true, 97);
  auto damaged = image::check_sandbox_image(dir.path() / "damaged");
  ASSERT_FALSE(damaged);
  EXPECT_THAT(damaged.error().message(),
              AllOf(HasSubstr("damaged has a damaged EROFS superblock"), HasSubstr("log2 is 97")));

  write_file(dir.path() / "truncated", 8192, true, 12, 100);
  auto truncated = image::check_sandbox_image(dir.path() / "truncated");
  ASSERT_FALSE(truncated);
  EXPECT_THAT(truncated.error().message(),
              HasSubstr("truncated is truncated: it is 8192 bytes, and its EROFS superblock says "
                        "409600"));
}

TEST(SandboxImage, AMissingFileOrADirectoryIsRefused) {
  TempDir dir;
  auto missing = image::check_sandbox_image(dir.path() / "absent");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr("absent"));
  auto directory = image::check_sandbox_image(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.error().message(), HasSubstr("not a regular file"));
}

TEST(SandboxImage, TheCacheListsBuiltAndImportedImagesWithTheirSizes) {
  TempDir cache;
  std::filesystem::create_directories(cache.path() / "rootfs/abc");
  std::filesystem::create_directories(cache.path() / "rootfs/empty");
  std::filesystem::create_directories(cache.path() / "images");
  write_file(cache.path() / "rootfs/abc/rootfs.erofs", 64 * 1024, true);
  write_file(cache.path() / "images/mine.erofs", 8192, true);
  write_file(cache.path() / "images/notes.txt", 10, false);

  const auto images = image::list_cached_images(cache.path());
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].path, cache.path() / "images/mine.erofs");
  EXPECT_EQ(images[1].path, cache.path() / "rootfs/abc/rootfs.erofs");
  EXPECT_GE(images[1].bytes, 64u * 1024);

  const CommandOutput list =
      run_command("DSEC_CACHE=" + cache.path().string() + " " + kVmm + " image list");
  EXPECT_EQ(list.exit_status, 0);
  EXPECT_THAT(list.output, AllOf(HasSubstr("mine.erofs"), HasSubstr("rootfs/abc/rootfs.erofs"),
                                 HasSubstr("MiB")));
}

TEST(SandboxImage, RunRefusesAnImageThatIsNotAFileSystemBeforeBooting) {
  TempDir dir;
  write_file(dir.path() / "bad.img", 8192, false);
  const CommandOutput result =
      run_command(kVmm + " run --image " + dir.file("bad.img").string() + " 2>&1 >/dev/null");
  EXPECT_EQ(result.exit_status, 1);
  EXPECT_THAT(result.output,
              AllOf(HasSubstr("bad.img is not an EROFS file system"), HasSubstr("build-rootfs")));
}

TEST(SandboxImage, ScratchNeedsAnImage) {
  TempDir dir;
  write_file(dir.path() / "scratch", 8192, false);
  const CommandOutput result =
      run_command(kVmm + " run --scratch " + dir.file("scratch").string() + " 2>&1");
  EXPECT_NE(result.exit_status, 0);
  EXPECT_THAT(result.output, AllOf(HasSubstr("--scratch"), HasSubstr("--image")));
}

}  // namespace
}  // namespace dsec::test

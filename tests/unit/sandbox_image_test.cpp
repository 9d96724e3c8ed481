// Sandbox images on the host (vmm/image): the EROFS check before a boot, the cache
// listing, and `dsec-vmm run --image` / `image list` on bad input. No KVM: the image is
// checked before any VM exists.
#include "vmm/image/sandbox_image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kVmm = DSEC_BINARY_DIR "/vmm/dsec-vmm";

// A file of `size` bytes, with EROFS's superblock magic at byte 1024 when `erofs`.
void write_file(const std::filesystem::path& path, size_t size, bool erofs) {
  std::string bytes(size, '\x5a');
  if (erofs && size >= 1028) {
    bytes.replace(1024, 4, "\xe2\xe1\xf5\xe0");
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
  write_file(dir.path() / "short", 1026, true);  // ends inside the magic
  for (const char* name : {"random", "short"}) {
    auto checked = image::check_sandbox_image(dir.path() / name);
    ASSERT_FALSE(checked) << name;
    EXPECT_THAT(checked.error().message(),
                AllOf(HasSubstr(name), HasSubstr("is not an EROFS file system"),
                      HasSubstr("images/build-rootfs")));
  }
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
      run_command(kVmm + " run --image " + dir.file("bad.img") + " 2>&1 >/dev/null");
  EXPECT_EQ(result.exit_status, 1);
  EXPECT_THAT(result.output,
              AllOf(HasSubstr("bad.img is not an EROFS file system"), HasSubstr("build-rootfs")));
}

TEST(SandboxImage, ScratchNeedsAnImage) {
  TempDir dir;
  write_file(dir.path() / "scratch", 8192, false);
  const CommandOutput result =
      run_command(kVmm + " run --scratch " + dir.file("scratch") + " 2>&1");
  EXPECT_NE(result.exit_status, 0);
  EXPECT_THAT(result.output, AllOf(HasSubstr("--scratch"), HasSubstr("--image")));
}

}  // namespace
}  // namespace dsec::test

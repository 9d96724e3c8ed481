// An imported container image boots (docs/images.md): an OCI layout built here from a small
// root tree (Debian's static busybox) in two layers, the upper one deleting a file of the
// lower with a whiteout, made into an image by `dsec-vmm image import`, booted by
// `dsec-vmm run --image`; through the agent, the deleted file is gone and the others are
// there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"
#include "tests/support/oci_layout_builder.h"
#include "tests/support/sandbox.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

TEST(OciImage, AnImportedLayoutBootsWithoutTheFileItsUpperLayerDeleted) {
  if (default_image().kernel.empty()) return;  // the failure says why
  const std::string busybox = file_text("/bin/busybox");
  ASSERT_FALSE(busybox.empty()) << "/bin/busybox is missing: run tools/install-deps";

  TempDir dir;
  OciLayoutBuilder layout(dir.file("layout"));
  // The lower layer: a shell and a few tools, and /etc with two files.
  TarBuilder lower;
  lower.dir("bin").file("bin/busybox", busybox, 0755);
  for (const char* tool : {"sh", "cat", "ls", "test", "stat"}) {
    lower.symlink(std::string("bin/") + tool, "busybox");
  }
  lower.dir("etc").file("etc/greeting", "hello from the lower layer\n").file("etc/doomed", "x\n");
  lower.file("bin/setuid", "#!/bin/sh\n", 04755);
  // The upper layer (gzip) deletes etc/doomed and adds etc/added.
  TarBuilder upper;
  upper.dir("etc").whiteout("etc", "doomed").file("etc/added", "from the upper layer\n");
  layout.index({layout.image(
      {layout.blob(lower.bytes(), OciLayoutBuilder::kLayerTar),
       layout.blob(upper.bytes(TarBuilder::Compression::kGzip), OciLayoutBuilder::kLayerGzip)},
      "amd64", "busybox-test:1")});

  const std::filesystem::path image = dir.file("busybox.erofs");
  const ProcessOutput imported = run_vmm(
      {"image", "import", layout.dir().string(), "--out", image.string()}, std::chrono::minutes(5));
  ASSERT_EQ(imported.exit_status, 0) << imported.describe();

  Sandbox vm({"--image", image.string()});
  std::string why;
  ASSERT_TRUE(vm.wait_ready(kReadyDeadline, why)) << why;
  const ShellOutput etc = sh(vm,
                             "cat /etc/greeting /etc/added && ls /etc && "
                             "if test -e /etc/doomed; then echo doomed is there; fi");
  EXPECT_TRUE(etc.ok()) << etc.out << vm.describe();
  EXPECT_EQ(etc.out, "hello from the lower layer\nfrom the upper layer\nadded\ngreeting\n");
  // Modes come through whole, set-user-ID bit included.
  const ShellOutput modes = sh(vm, "stat -c '%a %n' /bin/setuid /etc/greeting");
  EXPECT_EQ(modes.out, "4755 /bin/setuid\n644 /etc/greeting\n");
  // The root is the image under the private overlay, as for images/build-rootfs's.
  const ShellOutput mounts = sh(vm, "cat /proc/mounts");
  EXPECT_THAT(mounts.out, HasSubstr("overlay / overlay"));
}

// An image whose EROFS superblock is sound (so the host's check passes) but whose metadata
// is gone: the guest cannot mount it, says so on the console, and dsec-vmm fails (2: the
// guest did not end cleanly) instead of reporting a sandbox that ran.
TEST(OciImage, AnImageTheGuestCannotMountEndsTheRunWithAFailure) {
  if (default_image().kernel.empty()) return;  // the failure says why
  TempDir dir;
  OciLayoutBuilder layout(dir.file("layout"));
  TarBuilder layer;
  layer.dir("etc").file("etc/greeting", "hello\n");
  layout.index(
      {layout.image({layout.blob(layer.bytes(), OciLayoutBuilder::kLayerTar)}, "amd64", "tiny:1")});
  const std::filesystem::path image = dir.file("tiny.erofs");
  const ProcessOutput imported = run_vmm(
      {"image", "import", layout.dir().string(), "--out", image.string()}, std::chrono::minutes(5));
  ASSERT_EQ(imported.exit_status, 0) << imported.describe();

  // Everything after the superblock (bytes 1024 to 1152) becomes zeros: the root inode with it.
  std::string bytes = file_text(image);
  ASSERT_GT(bytes.size(), 1152U);
  std::fill(bytes.begin() + 1152, bytes.end(), '\0');
  const std::filesystem::path corrupt = dir.file("corrupt.erofs");
  std::ofstream(corrupt, std::ios::binary) << bytes;

  const ProcessOutput run = run_vmm({"run", "--image", corrupt.string()}, kReadyDeadline);
  EXPECT_EQ(run.exit_status, 2) << run.describe();
  EXPECT_THAT(run.out, HasSubstr("cannot boot the image on /dev/vda")) << run.describe();
  EXPECT_THAT(run.err, HasSubstr("rebooted without its init announcing it")) << run.describe();
}

}  // namespace
}  // namespace dsec::test

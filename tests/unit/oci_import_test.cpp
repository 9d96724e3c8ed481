// `dsec-vmm image import` (vmm/image/oci_import, vmm/cli/image.cpp) on OCI layouts built in
// the test: layers with whiteouts into an EROFS image (read back with fsck.erofs), a layout
// directory or its tarball, the image cache, the choice of manifest, and what the user sees
// for bad input: not a layout, a corrupt one, a target that exists, a hostile layer, an
// interrupted import. No KVM: nothing boots here (tests/e2e/oci_image_test.cpp boots one).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/file_text.h"
#include "tests/support/oci_layout_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "vmm/image/sandbox_image.h"

namespace dsec::test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class OciImport : public ::testing::Test {
 protected:
  OciImport() : layout_(dir_.path() / "layout") {
    fs::create_directories(out_dir());
    // The lower layer has etc/doomed; the upper one deletes it and adds etc/added.
    lower_ = layout_.blob(TarBuilder()
                              .dir("etc")
                              .file("etc/greeting", "hello\n")
                              .file("etc/doomed", "doomed\n")
                              .dir("bin")
                              .file("bin/tool", "#!/bin/sh\n", 0755)
                              .bytes(),
                          OciLayoutBuilder::kLayerTar);
    upper_ = layout_.blob(TarBuilder()
                              .dir("etc")
                              .whiteout("etc", "doomed")
                              .file("etc/added", "added\n")
                              .bytes(TarBuilder::Compression::kGzip),
                          OciLayoutBuilder::kLayerGzip);
    layout_.index({image({lower_, upper_}, "amd64", "example.org/team/app:1.0")});
  }

  nlohmann::json image(const std::vector<nlohmann::json>& layers, const std::string& arch,
                       const std::string& ref = "") {
    return layout_.image(layers, arch, ref);
  }

  fs::path out_dir() const { return dir_.path() / "out"; }
  fs::path out() const { return out_dir() / "app.erofs"; }
  fs::path cache() const { return dir_.path() / "cache"; }

  // `dsec-vmm image import ARGS...`, with the test's cache and `path_prefix` before PATH.
  ProcessOutput import(std::vector<std::string> args, const std::string& path_prefix = "") {
    std::vector<std::string> argv{"env", "DSEC_CACHE=" + cache().string()};
    if (!path_prefix.empty()) {
      argv.push_back("PATH=" + path_prefix + ":" + std::getenv("PATH"));
    }
    argv.insert(argv.end(), {kVmm, "image", "import"});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, std::chrono::seconds(120));
  }

  // The image's files, extracted by erofs-utils' own reader.
  fs::path extract(const fs::path& image) {
    const fs::path into = dir_.path() / ("extracted-" + image.filename().string());
    const ProcessOutput fsck = run_process(
        {"fsck.erofs", "--extract=" + into.string(), image.string()}, std::chrono::seconds(60));
    EXPECT_EQ(fsck.exit_status, 0) << fsck.describe();
    return into;
  }

  // Runs the import, which must fail saying `expected`, and leave nothing in the out dir.
  void expect_refused(const std::vector<std::string>& args, const std::string& expected) {
    const ProcessOutput result = import(args);
    EXPECT_EQ(result.exit_status, 1) << result.describe();
    EXPECT_THAT(result.err, HasSubstr(expected)) << result.describe();
    EXPECT_THAT(result.out, IsEmpty());
    EXPECT_THAT(names_in(out_dir()), IsEmpty()) << "a failed import left files behind";
  }

  TempDir dir_;
  OciLayoutBuilder layout_;
  nlohmann::json lower_, upper_;
};

TEST_F(OciImport, ImportsTheLayersInOrderWithTheirWhiteouts) {
  const ProcessOutput result = import({layout_.dir().string(), "--out", out().string()});
  ASSERT_EQ(result.exit_status, 0) << result.describe();
  EXPECT_EQ(result.out, "image=" + out().string() + "\n");
  EXPECT_THAT(result.err, AllOf(HasSubstr("example.org/team/app:1.0"), HasSubstr("linux/amd64"),
                                HasSubstr("layer 1 of 2 sha256:"), HasSubstr(", tar\n"),
                                HasSubstr("layer 2 of 2 sha256:"), HasSubstr(", tar+gzip\n"),
                                HasSubstr("1 whiteout"), HasSubstr("wrote " + out().string())));
  EXPECT_TRUE(image::check_sandbox_image(out()));
  EXPECT_EQ(fs::status(out()).permissions(), fs::perms(0444));
  EXPECT_THAT(names_in(out_dir()), ElementsAre("app.erofs")) << "a working file was left";

  const fs::path tree = extract(out());
  EXPECT_EQ(file_text(tree / "etc/greeting"), "hello\n");
  EXPECT_EQ(file_text(tree / "etc/added"), "added\n");
  EXPECT_THAT(names_in(tree / "etc"), ElementsAre("added", "greeting"));
  EXPECT_EQ(fs::status(tree / "bin/tool").permissions(), fs::perms(0755));
}

TEST_F(OciImport, ATarballOfTheLayoutGivesTheSameBytes) {
  ASSERT_EQ(import({layout_.dir().string(), "--out", out().string()}).exit_status, 0);
  const fs::path tarball = dir_.path() / "layout.tar";
  write_bytes(tarball, layout_.tarball());
  const fs::path again = out_dir() / "from-tarball.erofs";
  const ProcessOutput result = import({tarball.string(), "--out", again.string()});
  ASSERT_EQ(result.exit_status, 0) << result.describe();
  EXPECT_THAT(result.err, HasSubstr("unpacking the layout from " + tarball.string()));
  EXPECT_EQ(file_text(again), file_text(out())) << "the same layout gave other bytes";
  EXPECT_THAT(names_in(out_dir()), ElementsAre("app.erofs", "from-tarball.erofs"));
}

TEST_F(OciImport, WithoutOutTheImageGoesToTheCacheWhereImageListShowsIt) {
  const ProcessOutput result = import({layout_.dir().string()});
  ASSERT_EQ(result.exit_status, 0) << result.describe();
  EXPECT_THAT(result.out, AllOf(HasSubstr("image=" + (cache() / "images/app-1.0-").string()),
                                HasSubstr(".erofs\n")));
  const ProcessOutput list = run_process(
      {"env", "DSEC_CACHE=" + cache().string(), kVmm, "image", "list"}, std::chrono::seconds(30));
  EXPECT_EQ(list.exit_status, 0) << list.describe();
  EXPECT_THAT(list.out, AllOf(HasSubstr("images/app-1.0-"), HasSubstr("MiB")));
}

TEST_F(OciImport, ASourceThatIsNotAnOciLayoutIsRefused) {
  const fs::path empty = dir_.path() / "empty";
  fs::create_directories(empty);
  expect_refused({empty.string(), "--out", out().string()},
                 "is not an OCI image layout (it has no oci-layout file)");

  const fs::path legacy = dir_.path() / "legacy";
  fs::create_directories(legacy);
  write_bytes(legacy / "manifest.json", "[]");
  expect_refused({legacy.string(), "--out", out().string()}, "Docker 24 or older");

  const fs::path legacy_tar = dir_.path() / "legacy.tar";
  write_bytes(legacy_tar,
              TarBuilder().file("manifest.json", "[]").file("repositories", "{}").bytes());
  expect_refused({legacy_tar.string(), "--out", out().string()}, "Docker 24 or older");

  const fs::path garbage = dir_.path() / "garbage";
  write_bytes(garbage, std::string(4096, 'x'));
  expect_refused({garbage.string(), "--out", out().string()}, "Unrecognized archive format");

  expect_refused({(dir_.path() / "absent").string(), "--out", out().string()},
                 "does not exist or is neither a directory nor a file");
}

TEST_F(OciImport, ACorruptLayoutIsRefusedAndLeavesNothingBehind) {
  const fs::path lower = layout_.blob_path(lower_["digest"]);
  const std::string lower_bytes = file_text(lower);
  const std::string index_text = file_text(layout_.dir() / "index.json");
  const std::vector<std::string> args{layout_.dir().string(), "--out", out().string()};

  write_bytes(layout_.dir() / "index.json", "{\"schemaVersion\": 2, \"manifests\": [");
  expect_refused(args, "index.json is not valid JSON");
  write_bytes(layout_.dir() / "index.json", index_text);

  fs::remove(lower);
  expect_refused(args, "(layer 1 of 2) is missing: the layout has no blobs/sha256/");

  std::string flipped = lower_bytes;
  flipped[lower_bytes.find("hello")] = 'j';  // inside etc/greeting's data: still a tar archive
  write_bytes(lower, flipped);
  expect_refused(args, "(layer 1 of 2) does not match its digest");

  write_bytes(lower, lower_bytes.substr(0, lower_bytes.size() / 2));
  expect_refused(args, fmt::format("(layer 1 of 2) is {} bytes, but its descriptor says {}",
                                   lower_bytes.size() / 2, lower_bytes.size()));

  // A layer that is not a tar archive at all, under its own (right) digest: libarchive's
  // reason, after the digest was found right.
  const nlohmann::json junk = layout_.blob(std::string(3000, 'j'), OciLayoutBuilder::kLayerTar);
  layout_.index({image({junk}, "amd64")});
  expect_refused(args, "Unrecognized archive format");
}

TEST_F(OciImport, AnExistingTargetIsRefusedUnlessForced) {
  write_bytes(out(), "an old image");
  const ProcessOutput refused = import({layout_.dir().string(), "--out", out().string()});
  EXPECT_EQ(refused.exit_status, 1);
  EXPECT_THAT(refused.err, AllOf(HasSubstr(out().string() + " exists"), HasSubstr("--force")));
  EXPECT_EQ(file_text(out()), "an old image");

  const ProcessOutput forced = import({layout_.dir().string(), "--out", out().string(), "--force"});
  ASSERT_EQ(forced.exit_status, 0) << forced.describe();
  EXPECT_TRUE(image::check_sandbox_image(out()));
  EXPECT_THAT(names_in(out_dir()), ElementsAre("app.erofs"));
}

TEST_F(OciImport, SeveralImagesAreToldApartByPlatformOrByManifest) {
  const nlohmann::json other =
      layout_.blob(TarBuilder().file("other", "other\n").bytes(), OciLayoutBuilder::kLayerTar);
  const nlohmann::json amd64 = image({lower_, upper_}, "amd64", "app:1");
  const nlohmann::json arm64 = image({other}, "arm64", "app:1");
  // A nested index, as docker save writes one: the name on the outer descriptor.
  nlohmann::json nested =
      layout_.blob(nlohmann::json({{"schemaVersion", 2}, {"manifests", {arm64, amd64}}}).dump(),
                   "application/vnd.oci.image.index.v1+json");
  nested["annotations"] = {{"io.containerd.image.name", "docker.io/library/app:1"}};
  layout_.index({nested});
  const ProcessOutput picked = import({layout_.dir().string(), "--out", out().string()});
  ASSERT_EQ(picked.exit_status, 0) << picked.describe();
  EXPECT_TRUE(fs::exists(extract(out()) / "etc/greeting"));

  // Two images for linux/amd64: the error lists them; --manifest picks one.
  const nlohmann::json second = image({other}, "amd64", "app:2");
  layout_.index({amd64, second});
  const std::string other_out = (out_dir() / "other.erofs").string();
  const ProcessOutput ambiguous = import({layout_.dir().string(), "--out", other_out});
  EXPECT_EQ(ambiguous.exit_status, 1);
  EXPECT_THAT(ambiguous.err,
              AllOf(HasSubstr("holds 2 images, and 2 of them for linux/amd64"),
                    HasSubstr(amd64["digest"].get<std::string>() + "  linux/amd64  app:1"),
                    HasSubstr(second["digest"].get<std::string>() + "  linux/amd64  app:2"),
                    HasSubstr("pick one with --manifest DIGEST")));
  const ProcessOutput by_digest =
      import({layout_.dir().string(), "--out", other_out, "--manifest", second["digest"]});
  ASSERT_EQ(by_digest.exit_status, 0) << by_digest.describe();
  EXPECT_EQ(file_text(extract(other_out) / "other"), "other\n");
  const ProcessOutput by_name =
      import({layout_.dir().string(), "--out", other_out, "--force", "--manifest", "app:1"});
  ASSERT_EQ(by_name.exit_status, 0) << by_name.describe();
  const ProcessOutput unknown =
      import({layout_.dir().string(), "--out", other_out, "--force", "--manifest", "app:3"});
  EXPECT_EQ(unknown.exit_status, 1);
  EXPECT_THAT(unknown.err, AllOf(HasSubstr("no manifest in the layout is app:3"),
                                 HasSubstr("app:1"), HasSubstr("app:2")));
}

TEST_F(OciImport, AnImageForAnotherArchitectureIsRefused) {
  layout_.index({image({lower_}, "arm64")});
  expect_refused({layout_.dir().string(), "--out", out().string()},
                 "the image is for linux/arm64; dsec-vmm runs linux/amd64 guests");
}

TEST_F(OciImport, AHostileLayerFailsTheImportAndLeavesNothingBehind) {
  const nlohmann::json hostile =
      layout_.blob(TarBuilder().file("etc/ok", "ok").file("../../planted", "payload").bytes(),
                   OciLayoutBuilder::kLayerTar);
  layout_.index({image({lower_, hostile}, "amd64")});
  expect_refused({layout_.dir().string(), "--out", out().string()},
                 "layer 2 of 2: an entry has the path \"../../planted\", which goes up");
  EXPECT_FALSE(fs::exists(dir_.path() / "planted"));
  EXPECT_FALSE(fs::exists(dir_.path().parent_path() / "planted"));
}

// mkfs.erofs stand-ins, first in PATH: one that interrupts the import (SIGINT to its parent,
// as Ctrl-C would) and then waits for a kill, one that fails.
TEST_F(OciImport, AnInterruptedImportStopsMkfsAndLeavesNothingBehind) {
  const fs::path bin = dir_.path() / "bin";
  fs::create_directories(bin);
  write_bytes(bin / "mkfs.erofs", "#!/bin/sh\nkill -INT $PPID\nexec sleep 600\n");
  fs::permissions(bin / "mkfs.erofs", fs::perms(0755));
  const ProcessOutput result =
      import({layout_.dir().string(), "--out", out().string()}, bin.string());
  EXPECT_FALSE(result.timed_out) << "the stand-in mkfs.erofs was not stopped";
  EXPECT_EQ(result.exit_status, 130) << result.describe();
  EXPECT_THAT(result.err, HasSubstr("error: interrupted"));
  EXPECT_THAT(names_in(out_dir()), IsEmpty());
}

TEST_F(OciImport, AFailingMkfsIsReportedWithWhatItSaid) {
  const fs::path bin = dir_.path() / "bin";
  fs::create_directories(bin);
  write_bytes(bin / "mkfs.erofs", "#!/bin/sh\necho 'mkfs.erofs: no space left' >&2\nexit 3\n");
  fs::permissions(bin / "mkfs.erofs", fs::perms(0755));
  const ProcessOutput result =
      import({layout_.dir().string(), "--out", out().string()}, bin.string());
  EXPECT_EQ(result.exit_status, 1) << result.describe();
  EXPECT_THAT(result.err,
              AllOf(HasSubstr("mkfs.erofs failed (exit status 3)"), HasSubstr("no space left")));
  EXPECT_THAT(names_in(out_dir()), IsEmpty());
}

}  // namespace
}  // namespace dsec::test

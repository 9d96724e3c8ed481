// Container image layers applied onto a tree (vmm/image/layer_unpack): entries with their
// metadata, whiteouts and opaque directories across layers, and hostile archives: paths
// out of the tree, symlinks and hard links that lead out of it, device nodes, sizes.
#include "vmm/image/layer_unpack.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>

#include "tests/support/oci_layout_builder.h"
#include "tests/support/temp_dir.h"
#include "vmm/common/unique_fd.h"
#include "vmm/image/private_dir.h"
#include "vmm/image/tar_stream.h"

namespace dsec::test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Compression = TarBuilder::Compression;

class LayerUnpack : public ::testing::Test {
 protected:
  LayerUnpack() {
    fs::create_directories(root());
    fs::create_directories(outside());
    write_bytes(outside() / "secret", "host file\n");
    root_fd_ = UniqueFd(::open(root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    make_builder({});
  }

  void make_builder(image::UnpackLimits limits, bool keep_owners = true) {
    builder_.emplace(root_fd_.get(), limits, keep_owners);
  }

  Result<image::LayerStats> apply(const TarBuilder& layer,
                                  Compression compression = Compression::kNone) {
    const std::string bytes = layer.bytes(compression);
    auto stream = image::TarStream::from_memory(
        std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "the layer");
    if (!stream) {
      return std::unexpected(stream.error());
    }
    return builder_->apply_layer(*stream, {});
  }

  // The tree is in dir/root; dir/outside is the host's, which no layer may reach.
  fs::path root() const { return dir_.path() / "root"; }
  fs::path outside() const { return dir_.path() / "outside"; }
  bool exists(const std::string& path) const {
    std::error_code ec;
    return fs::symlink_status(root() / path, ec).type() != fs::file_type::not_found;
  }
  std::string text(const std::string& path) const { return file_text(root() / path); }
  // The host's side is as the test made it: one file, unchanged, with one link.
  void expect_outside_untouched() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(outside())) {
      names.push_back(entry.path().filename().string());
    }
    EXPECT_THAT(names, ::testing::ElementsAre("secret"));
    EXPECT_EQ(file_text(outside() / "secret"), "host file\n");
    EXPECT_EQ(fs::hard_link_count(outside() / "secret"), 1u);
  }

  TempDir dir_;
  UniqueFd root_fd_;
  std::optional<image::TreeBuilder> builder_;
};

TEST_F(LayerUnpack, AppliesFilesDirectoriesLinksAndFifosWithTheirModesAndTimes) {
  auto stats = apply(TarBuilder()
                         .dir("usr", 0755)
                         .dir("usr/bin", 0755)
                         .file("usr/bin/tool", "#!/bin/sh\n", 04755, 1'600'000'000)
                         .symlink("bin", "usr/bin")
                         .hardlink("usr/bin/tool2", "usr/bin/tool")
                         .dir("etc", 0700)
                         .file("etc/conf", "x=1\n", 0640)
                         .fifo("run.fifo"));
  ASSERT_TRUE(stats) << stats.error().message();
  ASSERT_TRUE(builder_->finish());
  EXPECT_EQ(stats->entries, 8u);
  EXPECT_EQ(stats->bytes, 14u);
  EXPECT_EQ(text("bin/tool"), "#!/bin/sh\n");  // through the symlink
  EXPECT_EQ(fs::read_symlink(root() / "bin"), "usr/bin");
  struct stat tool {};
  ASSERT_EQ(::stat((root() / "usr/bin/tool").c_str(), &tool), 0);
  EXPECT_EQ(tool.st_mode & 07777, 04755u);
  EXPECT_EQ(tool.st_mtime, 1'600'000'000);
  EXPECT_EQ(tool.st_nlink, 2u);
  EXPECT_TRUE(fs::equivalent(root() / "usr/bin/tool", root() / "usr/bin/tool2"));
  EXPECT_EQ(fs::status(root() / "etc").permissions(), fs::perms::owner_all);
  EXPECT_EQ(fs::status(root() / "etc/conf").permissions() & fs::perms::all, fs::perms(0640));
  EXPECT_EQ(fs::symlink_status(root() / "run.fifo").type(), fs::file_type::fifo);
  EXPECT_EQ(builder_->newest_mtime(), TarBuilder::kMtime);
}

TEST_F(LayerUnpack, GzipAndZstdLayersAreRead) {
  ASSERT_TRUE(apply(TarBuilder().file("a", "gzip\n"), Compression::kGzip));
  ASSERT_TRUE(apply(TarBuilder().file("b", "zstd\n"), Compression::kZstd));
  EXPECT_EQ(text("a"), "gzip\n");
  EXPECT_EQ(text("b"), "zstd\n");
}

TEST_F(LayerUnpack, AWhiteoutDeletesAFileOrADirectoryOfTheLayersBelow) {
  ASSERT_TRUE(apply(TarBuilder()
                        .dir("etc")
                        .file("etc/doomed", "x")
                        .file("etc/kept", "y")
                        .dir("var/cache/deep")
                        .file("var/cache/deep/file", "z")));
  auto stats = apply(TarBuilder().whiteout("etc", "doomed").whiteout("var", "cache"));
  ASSERT_TRUE(stats) << stats.error().message();
  EXPECT_EQ(stats->whiteouts, 2u);
  EXPECT_FALSE(exists("etc/doomed"));
  EXPECT_FALSE(exists("etc/.wh.doomed"));
  EXPECT_EQ(text("etc/kept"), "y");
  EXPECT_FALSE(exists("var/cache"));
  EXPECT_TRUE(exists("var"));
}

TEST_F(LayerUnpack, AnOpaqueDirectoryHidesTheLayersBelowButKeepsItsOwnLayersEntries) {
  ASSERT_TRUE(apply(TarBuilder()
                        .dir("app")
                        .file("app/old", "lower")
                        .dir("app/sub")
                        .file("app/sub/old", "lower")
                        .file("other", "lower")));
  // The layer's own entries before the marker and after it survive; the marker hides the
  // rest, in subdirectories the layer also has.
  ASSERT_TRUE(apply(TarBuilder()
                        .dir("app")
                        .file("app/before", "upper")
                        .dir("app/sub")
                        .file("app/sub/new", "upper")
                        .opaque("app")
                        .file("app/after", "upper")));
  EXPECT_EQ(text("app/before"), "upper");
  EXPECT_EQ(text("app/after"), "upper");
  EXPECT_EQ(text("app/sub/new"), "upper");
  EXPECT_FALSE(exists("app/old"));
  EXPECT_FALSE(exists("app/sub/old"));
  EXPECT_FALSE(exists("app/.wh..wh..opq"));
  EXPECT_EQ(text("other"), "lower");
}

TEST_F(LayerUnpack, AWhiteoutSparesWhatItsOwnLayerAdded) {
  ASSERT_TRUE(apply(TarBuilder().file("f", "lower")));
  // The layer replaces f and whites out the lower one, in either order.
  ASSERT_TRUE(apply(TarBuilder().file("f", "upper").whiteout("", "f")));
  EXPECT_EQ(text("f"), "upper");
}

TEST_F(LayerUnpack, AnEntryReplacesWhatTheLayersBelowHadAtItsPath) {
  ASSERT_TRUE(
      apply(TarBuilder().dir("x").file("x/inside", "1").file("y", "file").symlink("z", "x")));
  ASSERT_TRUE(apply(TarBuilder().file("x", "now a file").dir("y").file("y/inside", "2").dir("z")));
  ASSERT_TRUE(builder_->finish());
  EXPECT_EQ(text("x"), "now a file");
  EXPECT_EQ(text("y/inside"), "2");
  EXPECT_EQ(fs::symlink_status(root() / "z").type(), fs::file_type::directory);
  EXPECT_TRUE(fs::is_empty(root() / "z"));
}

TEST_F(LayerUnpack, DirectoriesGetTheirModesAfterTheirContentsAndMissingOnesAreOpenToAll) {
  // No entry for "opt" or "opt/app": made, then 0755. "ro" is read-only, yet filled.
  ASSERT_TRUE(apply(TarBuilder().file("opt/app/run", "r").dir("ro", 0555).file("ro/f", "f")));
  ASSERT_TRUE(apply(TarBuilder().file("ro/g", "g")));
  ASSERT_TRUE(builder_->finish());
  EXPECT_EQ(fs::status(root() / "opt").permissions(), fs::perms(0755));
  EXPECT_EQ(fs::status(root() / "opt/app").permissions(), fs::perms(0755));
  EXPECT_EQ(fs::status(root() / "ro").permissions(), fs::perms(0555));
  EXPECT_EQ(text("ro/g"), "g");
  EXPECT_EQ(fs::status(root()).permissions(), fs::perms(0755));
}

TEST_F(LayerUnpack, WithoutOwnersEachEntryKeepsWhatItsOwnerNeedsToReadIt) {
  make_builder({}, false);  // as an importer without root: mkfs.erofs reads the tree as owner
  ASSERT_TRUE(
      apply(TarBuilder().dir("locked", 0).file("locked/secret", "s", 0).file("x", "x", 0111)));
  ASSERT_TRUE(builder_->finish());
  EXPECT_EQ(fs::status(root() / "locked").permissions(), fs::perms(0500));
  EXPECT_EQ(fs::status(root() / "locked/secret").permissions(), fs::perms(0400));
  EXPECT_EQ(fs::status(root() / "x").permissions(), fs::perms(0511));
}

TEST_F(LayerUnpack, APathOutOfTheTreeIsRefused) {
  for (const char* path : {"../outside/planted", "a/../../outside/planted", "/tmp/planted"}) {
    auto stats = apply(TarBuilder().file(path, "payload"));
    ASSERT_FALSE(stats) << path;
    EXPECT_THAT(stats.error().message(), AllOf(HasSubstr(path), HasSubstr("is refused")));
  }
  expect_outside_untouched();
}

TEST_F(LayerUnpack, ASymlinkLeadingOutOfTheTreeIsResolvedInsideItAsTheGuestWould) {
  const std::string up = fs::relative(outside(), root()).string();  // "../outside"
  ASSERT_TRUE(apply(
      TarBuilder().symlink("relative", up).symlink("absolute", outside().string()).dir("outside")));
  // "relative/..." resolves to the tree's own /outside ("/.." is "/").
  ASSERT_TRUE(apply(TarBuilder().file("relative/via-relative", "1")));
  EXPECT_EQ(text("outside/via-relative"), "1");
  // "absolute/..." would be the host's directory; inside the tree it leads nowhere.
  auto absolute = apply(TarBuilder().file("absolute/via-absolute", "2"));
  ASSERT_FALSE(absolute);
  EXPECT_THAT(absolute.error().message(), HasSubstr("leads nowhere"));
  // A hard link through a symlink finds only the tree's files, not the host's secret.
  auto linked = apply(TarBuilder().hardlink("linked", "relative/secret"));
  ASSERT_FALSE(linked);
  EXPECT_THAT(linked.error().message(), HasSubstr("not a file of the image"));
  expect_outside_untouched();
}

TEST_F(LayerUnpack, AHardLinkToAPathOutOfTheTreeIsRefused) {
  for (const char* target : {"../outside/secret", "/etc/passwd"}) {
    auto stats = apply(TarBuilder().hardlink("stolen", target));
    ASSERT_FALSE(stats) << target;
    EXPECT_THAT(stats.error().message(), AllOf(HasSubstr(target), HasSubstr("is refused")));
  }
  EXPECT_FALSE(exists("stolen"));
  expect_outside_untouched();
}

TEST_F(LayerUnpack, DeviceNodesAreSkippedAndCounted) {
  auto stats = apply(TarBuilder().dir("dev").char_device("dev/kvm").block_device("dev/sda").file(
      "dev/README", "r"));
  ASSERT_TRUE(stats) << stats.error().message();
  EXPECT_EQ(stats->skipped_devices, 2u);
  EXPECT_FALSE(exists("dev/kvm"));
  EXPECT_FALSE(exists("dev/sda"));
  EXPECT_EQ(text("dev/README"), "r");
}

TEST_F(LayerUnpack, SizesAndEntryCountsAreBounded) {
  make_builder({.max_file_bytes = 100, .max_total_bytes = 150, .max_entries = 1000});
  auto big = apply(TarBuilder().file("big", std::string(101, 'b')));
  ASSERT_FALSE(big);
  EXPECT_THAT(big.error().message(), AllOf(HasSubstr("/big"), HasSubstr("more than the 100")));

  make_builder({.max_file_bytes = 100, .max_total_bytes = 150, .max_entries = 1000});
  auto total = apply(TarBuilder().file("a", std::string(80, 'a')).file("b", std::string(80, 'b')));
  ASSERT_FALSE(total);
  EXPECT_THAT(total.error().message(), HasSubstr("more than 150 bytes"));

  make_builder({.max_file_bytes = 100, .max_total_bytes = 150, .max_entries = 2});
  auto many = apply(TarBuilder().file("1", "").file("2", "").file("3", ""));
  ASSERT_FALSE(many);
  EXPECT_THAT(many.error().message(), HasSubstr("more than 2 entries"));
}

TEST_F(LayerUnpack, AWhiteoutThatNamesNothingIsRefused) {
  auto stats = apply(TarBuilder().file("etc/.wh.", ""));
  ASSERT_FALSE(stats);
  EXPECT_THAT(stats.error().message(), HasSubstr("a whiteout that names no file"));
}

TEST_F(LayerUnpack, ATruncatedLayerFailsWithTheReason) {
  std::string bytes = TarBuilder().file("f", std::string(10000, 'f')).bytes();
  bytes.resize(3000);
  auto stream = image::TarStream::from_memory(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "the layer");
  ASSERT_TRUE(stream);
  auto stats = builder_->apply_layer(*stream, {});
  ASSERT_FALSE(stats);
  EXPECT_THAT(stats.error().message(), AllOf(HasSubstr("the layer"), HasSubstr("runcated")));
}

TEST_F(LayerUnpack, AStopRequestEndsTheLayer) {
  std::stop_source stop;
  stop.request_stop();
  const std::string bytes = TarBuilder().file("f", "x").bytes();
  auto stream = image::TarStream::from_memory(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "the layer");
  ASSERT_TRUE(stream);
  auto stats = builder_->apply_layer(*stream, stop.get_token());
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error().message(), "interrupted");
  EXPECT_FALSE(exists("f"));
}

TEST(PrivateDir, RemovesEverythingInItHoweverDeepOrReadOnly) {
  TempDir parent;
  fs::path made;
  {
    auto dir = image::PrivateDir::create(parent.path(), "work");
    ASSERT_TRUE(dir) << dir.error().message();
    made = dir->path();
    EXPECT_EQ(fs::status(made).permissions(), fs::perms::owner_all);
    // 300 levels: deeper than a path the kernel resolves at once would be with longer names.
    fs::path deep = made;
    for (int i = 0; i < 300; ++i) {
      deep /= "level-with-a-long-name-" + std::to_string(i);
    }
    const std::string deep_text = deep.string();
    ASSERT_GT(deep_text.size(), 4096u);
    UniqueFd at(::dup(dir->fd()));
    for (int i = 0; i < 300; ++i) {
      const std::string name = "level-with-a-long-name-" + std::to_string(i);
      ASSERT_EQ(::mkdirat(at.get(), name.c_str(), 0700), 0);
      at = UniqueFd(::openat(at.get(), name.c_str(), O_RDONLY | O_DIRECTORY));
      ASSERT_TRUE(at);
    }
    ASSERT_EQ(::mkdirat(dir->fd(), "locked", 0), 0);
    ASSERT_EQ(::symlinkat(parent.path().c_str(), dir->fd(), "to-parent"), 0);
    write_bytes(parent.path() / "keep", "kept");
  }
  EXPECT_FALSE(fs::exists(made));
  EXPECT_EQ(file_text(parent.path() / "keep"), "kept");  // the symlink was not followed
}

}  // namespace
}  // namespace dsec::test

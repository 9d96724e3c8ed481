// The pool's image store (vmm/pool/image_store.h): names, and every file opened through a
// descriptor of its directory, never through a link, and owned by the daemon and writable by
// nobody else; snapshots staged in the store and renamed into place, within its limits.
#include "vmm/pool/image_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/file_text.h"
#include "tests/support/open_fds.h"
#include "tests/support/result_matchers.h"
#include "tests/support/stand_in_image.h"
#include "tests/support/temp_dir.h"
#include "vmm/common/file.h"

namespace dsec::pool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

template <typename T>
std::string error_of(const Result<T>& r) {
  return r ? std::string("(it was accepted)") : r.error().message();
}

TEST(ImageStoreNames, AreOneDirectorysNameNeverAPath) {
  for (const std::string& good :
       std::vector<std::string>{"a", "base", "Fork-1.2_b", "0", "a.b", std::string(64, 'x')}) {
    EXPECT_TRUE(check_image_name(good)) << good;
  }
  for (const std::string& bad : std::vector<std::string>{
           "", ".", "..", "../etc", "a/b", "/abs", ".hidden", "-a", "_a", "a..b", "a b", "a\nb",
           std::string("a\0b", 3), std::string(65, 'x'), "\xc3\xa9"}) {
    EXPECT_THAT(error_of(check_image_name(bad)), HasSubstr("an image's name must be")) << bad;
  }
}

class ImageStoreTest : public ::testing::Test {
 protected:
  fs::path store_path() const { return dir_.file("images"); }
  ImageStore open_store(ImageStoreLimits limits = {}) {
    auto store = ImageStore::open(store_path(), limits);
    EXPECT_TRUE(store) << store.error().message();
    return std::move(*store);
  }
  fs::path image(const std::string& name, size_t memory_bytes = 4096) {
    return test::write_store_image(store_path(), name, memory_bytes);
  }

  test::TempDir dir_;
};

TEST_F(ImageStoreTest, TheStoreIsMadeOwnerOnlyAndAnImagesFilesOpenChecked) {
  auto store = open_store();
  EXPECT_EQ(fs::status(store_path()).permissions(), fs::perms::owner_all);
  image("base", 8192);
  ASSERT_OK_AND_ASSIGN(auto files, store.open_image("base"));
  EXPECT_EQ(files.memory_bytes, 8192U);
  EXPECT_EQ(test::file_text(fd_path(files.memory.get())), std::string(8192, '\0'));
  EXPECT_THAT(error_of(store.open_image("none")),
              HasSubstr("the image store has no image none; make it there: dsec-vmm warm --out " +
                        (store_path() / "none").string()));
  EXPECT_THAT(error_of(store.open_image("../images/base")), HasSubstr("an image's name must"));
}

TEST_F(ImageStoreTest, AStoreThatIsALinkOrWritableByOthersIsRefused) {
  fs::create_directory(dir_.file("real"));
  fs::create_directory_symlink(dir_.file("real"), store_path());
  EXPECT_THAT(error_of(ImageStore::open(store_path(), {})),
              HasSubstr("is a symbolic link or not a directory"));
  fs::remove(store_path());
  fs::create_directory(store_path());
  for (const auto perms : {fs::perms::owner_all | fs::perms::group_write,
                           fs::perms::owner_all | fs::perms::others_write}) {
    fs::permissions(store_path(), perms);
    EXPECT_THAT(error_of(ImageStore::open(store_path(), {})), HasSubstr("is writable by"));
  }
  fs::permissions(store_path(), fs::perms::owner_all | fs::perms::group_read |
                                    fs::perms::group_exec | fs::perms::others_read |
                                    fs::perms::others_exec);
  EXPECT_TRUE(ImageStore::open(store_path(), {})) << "0755 is the daemon's alone to write";
}

TEST_F(ImageStoreTest, LinksAnywhereInAnImageAreNeverFollowed) {
  auto store = open_store();
  const fs::path real = image("real");
  // The image's directory a link to an image elsewhere.
  fs::create_directory_symlink(real, store_path() / "linked");
  EXPECT_THAT(error_of(store.open_image("linked")), HasSubstr("is a symbolic link"));
  // Its memory file a link to the real one.
  const fs::path partly = image("partly");
  fs::remove(partly / "memory");
  fs::create_symlink(real / "memory", partly / "memory");
  EXPECT_THAT(error_of(store.open_image("partly")),
              HasSubstr((partly / "memory").string() + " is a symbolic link"));
  // Its state file a FIFO: refused without blocking.
  const fs::path fifo = image("fifo");
  fs::remove(fifo / "state");
  ASSERT_EQ(::mkfifo((fifo / "state").c_str(), 0600), 0);
  EXPECT_THAT(error_of(store.open_image("fifo")), HasSubstr("is not a regular file"));
}

TEST_F(ImageStoreTest, AFileWritableByGroupOrOthersIsRefused) {
  auto store = open_store();
  const fs::path base = image("base");
  for (const auto extra : {fs::perms::group_write, fs::perms::others_write}) {
    fs::permissions(base / "memory", fs::perms::owner_read | fs::perms::owner_write | extra);
    EXPECT_THAT(error_of(store.open_image("base")),
                HasSubstr((base / "memory").string() + " is writable by"));
  }
  fs::permissions(base / "memory", fs::perms::owner_read | fs::perms::group_read);
  fs::permissions(base, fs::perms::owner_all | fs::perms::others_write);
  EXPECT_THAT(error_of(store.open_image("base")),
              HasSubstr(base.string() + " is writable by others"));
  fs::permissions(base, fs::perms::owner_all);
  EXPECT_TRUE(store.open_image("base"));
}

// Another user's file could change under a clone: only root can make one here to show it.
TEST_F(ImageStoreTest, AFileOfAnotherOwnerIsRefused) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "only root can give a file away";
  }
  auto store = open_store();
  const fs::path base = image("base");
  ASSERT_EQ(::chown((base / "state").c_str(), 65534, 65534), 0);
  EXPECT_THAT(error_of(store.open_image("base")),
              HasSubstr((base / "state").string() + " is owned by uid 65534"));
  ASSERT_EQ(::chown(store_path().c_str(), 65534, 65534), 0);
  EXPECT_THAT(error_of(ImageStore::open(store_path(), {})), HasSubstr("is owned by uid 65534"));
}

TEST_F(ImageStoreTest, ASnapshotIsStagedAndRenamedIntoPlaceWhole) {
  auto store = open_store();
  const size_t fds = test::open_fd_count();
  {
    auto staged = store.stage("fork", 6);
    ASSERT_TRUE(staged) << staged.error().message;
    for (const char* name : {"state", "memory"}) {
      const int fd = ::openat(staged->dir_fd(), name, O_WRONLY | O_CREAT | O_EXCL, 0600);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::write(fd, "abcdef", 6), 6);
      ::close(fd);
    }
    EXPECT_FALSE(fs::exists(store_path() / "fork")) << "not before it is whole";
    auto twin = store.stage("fork", 6);
    ASSERT_FALSE(twin);
    EXPECT_EQ(twin.error().kind, Failure::kConflict) << "one of that name is being written";
    ASSERT_TRUE(staged->commit()) << "renamed";
  }
  EXPECT_EQ(test::file_text(store_path() / "fork" / "memory"), "abcdef");
  ASSERT_OK_AND_ASSIGN(auto usage, store.usage());
  EXPECT_EQ(usage.images, 1U);
  EXPECT_EQ(usage.bytes, 12U);
  EXPECT_EQ(test::open_fd_count(), fds);

  auto taken = store.stage("fork", 6);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().kind, Failure::kConflict);
  auto bad = store.stage("../fork", 6);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, Failure::kInvalid);
}

TEST_F(ImageStoreTest, AStagedSnapshotNotCommittedLeavesNothingAndIsRemovedAtTheNextStart) {
  auto store = open_store();
  {
    auto staged = store.stage("fork", 6);
    ASSERT_TRUE(staged);
    const int fd = ::openat(staged->dir_fd(), "memory", O_WRONLY | O_CREAT | O_EXCL, 0600);
    ::close(fd);
  }
  EXPECT_TRUE(fs::is_empty(store_path())) << "dropped: nothing left";

  // One a daemon that died left behind.
  fs::create_directory(store_path() / ".staging-0123456789abcdef");
  std::ofstream(store_path() / ".staging-0123456789abcdef" / "memory") << "half";
  open_store();
  EXPECT_TRUE(fs::is_empty(store_path()));
}

TEST_F(ImageStoreTest, TheLimitsCountImagesAndBytesSnapshotsInFlightIncluded) {
  auto store = open_store({.max_bytes = 8192 + 1000, .max_images = 2});
  image("base", 8192);
  const uint64_t state = fs::file_size(store_path() / "base" / "state");
  ASSERT_LT(state, 1000U);
  auto big = store.stage("big", 1001);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().kind, Failure::kFull);
  EXPECT_THAT(big.error().message, HasSubstr("raise --image-store-max-bytes"));
  auto small = store.stage("small", 1);
  ASSERT_TRUE(small) << small.error().message;
  auto third = store.stage("third", 1);
  ASSERT_FALSE(third);
  EXPECT_THAT(third.error().message, HasSubstr("it holds 2 images (snapshots being written "
                                               "included), its maximum"));

  // What was written counts, not what was expected: more than the room left is refused.
  for (const char* name : {"state", "memory"}) {
    const int fd = ::openat(small->dir_fd(), name, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_EQ(::ftruncate(fd, 600), 0);
    ::close(fd);
  }
  const auto committed = small->commit();
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().kind, Failure::kFull);
  EXPECT_EQ(std::distance(fs::directory_iterator(store_path()), fs::directory_iterator()), 1)
      << "only base left";
  EXPECT_TRUE(store.stage("third", 1)) << "its reservation is gone with it";
}

}  // namespace
}  // namespace dsec::pool

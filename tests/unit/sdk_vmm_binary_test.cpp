// Where the embedding library finds dsec-vmm: an explicit path alone, else beside the
// library, the configured bin directory, then PATH; with real files and modes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "sdk/vmm_binary.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace dsec::sdk::detail {
namespace {

using ::testing::HasSubstr;

class SdkVmmBinaryTest : public ::testing::Test {
 protected:
  // dir/dsec-vmm with `mode`; returns its path.
  std::string make_binary(const std::string& dir, mode_t mode) {
    std::filesystem::create_directories(tmp_.path() / dir);
    const auto path = tmp_.file(dir + "/dsec-vmm");
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir(const std::string& name) const { return tmp_.file(name); }

  test::TempDir tmp_;
};

TEST_F(SdkVmmBinaryTest, AnExplicitPathIsTheOnlyCandidate) {
  const auto chosen = make_binary("explicit", 0755);
  make_binary("lib-bin", 0755);
  ASSERT_OK_AND_ASSIGN(const auto found, find_vmm_binary({.explicit_path = chosen,
                                                          .library_bindir = dir("lib-bin"),
                                                          .installed_bindir = {},
                                                          .path_env = {}}));
  EXPECT_EQ(found, chosen);

  const auto not_executable = make_binary("plain", 0644);
  const auto refused = find_vmm_binary({.explicit_path = not_executable,
                                        .library_bindir = dir("lib-bin"),
                                        .installed_bindir = {},
                                        .path_env = {}});
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr(not_executable + " is not an executable file"));
}

TEST_F(SdkVmmBinaryTest, BesideTheLibraryComesBeforeTheConfiguredDirectoryAndPath) {
  const auto beside = make_binary("lib-bin", 0755);
  const auto configured = make_binary("configured", 0755);
  const auto in_path = make_binary("path", 0755);
  VmmBinarySearch search{.explicit_path = {},
                         .library_bindir = dir("lib-bin"),
                         .installed_bindir = dir("configured"),
                         .path_env = dir("path")};
  EXPECT_EQ(find_vmm_binary(search).value_or(""), beside);
  search.library_bindir = dir("nothing-here");
  EXPECT_EQ(find_vmm_binary(search).value_or(""), configured);
  search.installed_bindir = dir("nothing-here");
  EXPECT_EQ(find_vmm_binary(search).value_or(""), in_path);
}

TEST_F(SdkVmmBinaryTest, PathIsSearchedInOrderSkippingWhatIsNotAnExecutableFile) {
  make_binary("not-executable", 0644);
  std::filesystem::create_directories(tmp_.path() / "a-directory" / "dsec-vmm");
  const auto second = make_binary("second", 0755);
  make_binary("third", 0755);
  const auto found =
      find_vmm_binary({.explicit_path = {},
                       .library_bindir = {},
                       .installed_bindir = {},
                       .path_env = "::" + dir("not-executable") + ":" + dir("a-directory") + ":" +
                                   dir("second") + ":" + dir("third")});
  EXPECT_EQ(found.value_or(""), second);
}

TEST_F(SdkVmmBinaryTest, NoneFoundNamesWhereItLookedAndWhatToDo) {
  const auto missing = find_vmm_binary({.explicit_path = {},
                                        .library_bindir = dir("lib-bin"),
                                        .installed_bindir = dir("configured"),
                                        .path_env = dir("p1") + ":" + dir("p2")});
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(),
              HasSubstr("searched: " + dir("lib-bin") + ", " + dir("configured") + ", " +
                        dir("p1") + ", " + dir("p2")));
  EXPECT_THAT(missing.error().hint(), HasSubstr("LaunchOptions::vmm_binary"));
}

}  // namespace
}  // namespace dsec::sdk::detail

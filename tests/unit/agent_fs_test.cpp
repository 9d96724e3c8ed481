// The guest agent's file system requests, the whole agent loop on the host
// (tests/support/agent_on_host.h) against the host client.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/agent_on_host.h"
#include "vmm/agent/client.h"
#include "vmm/agent/wire.h"

namespace dsec::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class AgentFs : public ::testing::Test {
 protected:
  AgentClient client() { return agent_.client(); }
  std::string path(const std::string& rel) const { return (agent_.dir() / rel).string(); }

  std::vector<std::string> listed(const std::string& dir, uint32_t depth) {
    auto entries = client().list_directory(dir, depth);
    EXPECT_TRUE(entries.has_value()) << entries.error().message();
    std::vector<std::string> out;
    for (const auto& e : entries ? *entries : std::vector<FsEntry>{}) {
      out.push_back(fs::path(e.path).lexically_relative(dir).string() +
                    (e.type == FsEntry::Type::kDirectory ? "/" : ""));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  test::AgentOnHost agent_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(AgentFs, MakesATreeListsItToADepthMovesAndRemovesIt) {
  auto made = client().make_directory(path("tree/a/b/c"));
  ASSERT_TRUE(made.has_value()) << made.error().message();
  EXPECT_TRUE(*made);
  auto again = client().make_directory(path("tree/a/b/c"));
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_FALSE(*again);
  std::ofstream(path("tree/a/file")) << "12345";
  fs::create_symlink("a/file", path("tree/link"));

  EXPECT_EQ(listed(path("tree"), 1), (std::vector<std::string>{"a/", "link"}));
  EXPECT_EQ(listed(path("tree"), 2), (std::vector<std::string>{"a/", "a/b/", "a/file", "link"}));
  EXPECT_EQ(listed(path("tree"), 32),
            (std::vector<std::string>{"a/", "a/b/", "a/b/c/", "a/file", "link"}));

  auto file = client().stat(path("tree/a/file"));
  ASSERT_TRUE(file.has_value()) << file.error().message();
  EXPECT_EQ(file->type, FsEntry::Type::kFile);
  EXPECT_EQ(file->size, 5U);
  EXPECT_FALSE(file->owner.empty());
  auto link = client().stat(path("tree/link"));
  ASSERT_TRUE(link.has_value()) << link.error().message();
  EXPECT_EQ(link->type, FsEntry::Type::kSymlink);
  EXPECT_EQ(link->symlink_target, "a/file");

  ASSERT_TRUE(client().move_path(path("tree/a"), path("tree/moved")).has_value());
  EXPECT_EQ(listed(path("tree"), 1), (std::vector<std::string>{"link", "moved/"}));
  ASSERT_TRUE(client().remove_path(path("tree")).has_value());
  EXPECT_FALSE(fs::exists(path("tree")));
}

TEST_F(AgentFs, FailuresNameThePathAndTheReason) {
  auto missing = client().stat(path("nothing-here"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("nothing-here: No such file or directory"),
            std::string::npos)
      << missing.error().message();
  std::ofstream(path("plain")) << "x";
  auto over_file = client().make_directory(path("plain/sub"));
  ASSERT_FALSE(over_file.has_value());
  EXPECT_NE(over_file.error().message().find("plain exists and is not a directory"),
            std::string::npos)
      << over_file.error().message();
  auto list_file = client().list_directory(path("plain"));
  ASSERT_FALSE(list_file.has_value());
  EXPECT_NE(list_file.error().message().find("cannot list"), std::string::npos);
  auto root = client().remove_path("/");
  ASSERT_FALSE(root.has_value());
  EXPECT_NE(root.error().message().find("root directory"), std::string::npos);
  auto relative = client().stat("relative/path");
  ASSERT_FALSE(relative.has_value());
  EXPECT_NE(relative.error().message().find("not absolute"), std::string::npos);
}

TEST_F(AgentFs, AListingIsBoundedAndSentInFramesItsHostChecks) {
  fs::create_directories(path("many"));
  for (int i = 0; i < 1500; ++i) {  // three frames of entries
    std::ofstream(path("many/" + std::to_string(i)));
  }
  EXPECT_EQ(listed(path("many"), 1).size(), 1500U);
  WireWriter deep;
  deep.string(path("many"));
  deep.u32(kMaxListDepth + 1);
  EXPECT_FALSE(decode_fs_list_request(deep.bytes()).has_value());
}

TEST_F(AgentFs, AWatchSeesFilesCreatedWrittenRenamedAndRemoved) {
  fs::create_directories(path("watched/sub"));
  auto watch = client().watch_directory(path("watched"), /*recursive=*/true);
  ASSERT_TRUE(watch.has_value()) << watch.error().message();
  std::ofstream(path("watched/new")) << "data";
  fs::rename(path("watched/new"), path("watched/renamed"));
  std::ofstream(path("watched/sub/deep")) << "x";
  fs::remove(path("watched/renamed"));
  std::vector<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (seen.size() < 6 && std::chrono::steady_clock::now() < deadline) {
    auto ev = watch->next(200ms);
    ASSERT_TRUE(ev.has_value()) << ev.error().message();
    if (*ev) {
      seen.push_back(std::to_string(static_cast<int>((*ev)->kind)) + " " +
                     fs::path((*ev)->path).lexically_relative(path("watched")).string());
    }
  }
  const std::vector<std::string> want{"0 new",     "1 new",      "3 new",
                                      "0 renamed", "0 sub/deep", "1 sub/deep"};
  std::vector<std::string> first(seen.begin(), seen.begin() + std::min<size_t>(6, seen.size()));
  EXPECT_EQ(first, want);
  auto quiet = watch->next(100ms);
  ASSERT_TRUE(quiet.has_value());
  ASSERT_TRUE(*quiet);
  EXPECT_EQ((*quiet)->kind, FsEvent::Kind::kRemoved);
  auto unwatchable = client().watch_directory(path("no-such-dir"));
  ASSERT_FALSE(unwatchable.has_value());
  EXPECT_NE(unwatchable.error().message().find("cannot watch"), std::string::npos);
}

}  // namespace
}  // namespace dsec::agent

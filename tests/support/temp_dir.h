// For tests: a fresh directory under gtest's TempDir(), removed with everything in it when
// the test ends.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace dsec::test {

class TempDir {
 public:
  TempDir() : TempDir(::testing::TempDir()) {}
  // Under `base`, e.g. /run (a local tmpfs in the test bed) for Unix sockets.
  explicit TempDir(const std::filesystem::path& base) {
    std::string pattern = (base / "dsec-test-XXXXXX").string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (::mkdtemp(name.data()) != nullptr) {
      path_ = name.data();
    }
    EXPECT_FALSE(path_.empty()) << "mkdtemp " << pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }
  // The names of the files in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace dsec::test

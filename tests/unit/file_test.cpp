// map_file: the read-only mapping the kernel loader reads images through.
#include "vmm/common/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace dsec {
namespace {

class MapFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dsec-map-file-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(MapFileTest, MapsEveryByteOfAFileThatIsNotAWholeNumberOfPages) {
  std::vector<uint8_t> bytes(3 * 4096 + 17);
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  const std::string path = write("image", bytes);
  auto mapped = map_file(path, 1 << 20);
  ASSERT_TRUE(mapped.has_value()) << mapped.error().message();
  const std::span<const uint8_t> seen = mapped->bytes();
  ASSERT_EQ(seen.size(), bytes.size());
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), bytes.begin()));

  // Moved, the mapping stays valid and is unmapped once.
  MappedFile moved = std::move(*mapped);
  EXPECT_EQ(moved.bytes()[bytes.size() - 1], bytes.back());
}

TEST_F(MapFileTest, RefusesAMissingFileADirectoryAnEmptyFileAndATooLargeOneNamingThePath) {
  const std::string missing = (dir_ / "missing").string();
  auto result = map_file(missing, 1 << 20);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find(missing), std::string::npos);

  result = map_file(dir_.string(), 1 << 20);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find("not a regular file"), std::string::npos);

  const std::string empty = write("empty", {});
  result = map_file(empty, 1 << 20);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find(empty + " is empty"), std::string::npos);

  const std::string large = write("large", std::vector<uint8_t>(3 << 20));
  result = map_file(large, 2 << 20);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find("3 MiB, more than the 2 MiB allowed"), std::string::npos);
}

}  // namespace
}  // namespace dsec

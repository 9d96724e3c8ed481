// What the embedding library reads of the host (a VMM log's last lines, the umask) and how
// its internal errors become the public ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "sdk/error_mapping.h"
#include "sdk/host_files.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace dsec::sdk::detail {
namespace {

TEST(SdkHostFilesTest, LastLinesOfALog) {
  test::TempDir tmp;
  const auto log = tmp.file("vmm.log");
  std::ofstream(log) << "one\ntwo\nthree\nfour\n";
  EXPECT_EQ(last_lines(log, 2), "three\nfour");
  EXPECT_EQ(last_lines(log, 4), "one\ntwo\nthree\nfour");
  EXPECT_EQ(last_lines(log, 10), "one\ntwo\nthree\nfour");
  std::ofstream(log) << "\nafter an empty line";
  EXPECT_EQ(last_lines(log, 1), "after an empty line");
  std::ofstream(log).flush();
  EXPECT_EQ(last_lines(log, 3), "");
  EXPECT_EQ(last_lines(tmp.file("missing"), 3), "");
}

TEST(SdkHostFilesTest, LastLinesReadOnlyTheEndOfAHugeLog) {
  test::TempDir tmp;
  const auto log = tmp.file("vmm.log");
  {
    std::ofstream out(log);
    out << std::string(size_t{1} << 20, 'x') << "\nlast\n";
  }
  const auto tail = last_lines(log, 3);
  EXPECT_LE(tail.size(), size_t{64} * 1024);
  EXPECT_TRUE(tail.ends_with("\nlast"));
}

TEST(SdkHostFilesTest, TheUmaskIsReadWithoutChangingIt) {
  const mode_t old = ::umask(027);
  const auto read = process_umask();
  const mode_t after = ::umask(old);
  ASSERT_OK(read);
  EXPECT_EQ(*read, 027U);
  EXPECT_EQ(after, 027U);
}

TEST(SdkErrorMappingTest, APublicErrorKeepsTheReasonTheErrnoAndTheHint) {
  const auto mapped =
      to_sdk_error(dsec::Error("connecting to /run/sb/vsock", ECONNREFUSED, "is the VMM running?"),
                   ErrorCode::kAgent);
  EXPECT_EQ(mapped.code(), ErrorCode::kAgent);
  EXPECT_EQ(mapped.message(), "connecting to /run/sb/vsock: Connection refused");
  EXPECT_EQ(mapped.hint(), "is the VMM running?");
  EXPECT_EQ(mapped.os_errno(), ECONNREFUSED);
  EXPECT_EQ(mapped.to_string(),
            "connecting to /run/sb/vsock: Connection refused; is the VMM running?");

  const sdk::Result<int> passed = with_code(dsec::Result<int>(5), ErrorCode::kHost);
  EXPECT_EQ(passed.value_or(0), 5);
  const sdk::Status failed = with_code(dsec::Status(fail("no snapshot")), ErrorCode::kApi);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), ErrorCode::kApi);
  EXPECT_EQ(failed.error().to_string(), "no snapshot");
}

}  // namespace
}  // namespace dsec::sdk::detail

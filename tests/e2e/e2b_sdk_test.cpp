// The pool's E2B front (docs/e2b.md) end to end in the test bed: E2B's own SDK (the `e2b`
// npm package, pinned in tools/install-deps) creates a sandbox of a warm image on a real
// pool, writes, reads and lists files in it, runs commands in bash (the default image has
// it), finds it by its metadata, sets its timeout and kills it, through E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"

namespace dsec::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kKey = "e2b-e2e-key-0123456789abcdef";
// tools/install-deps installs it there.
constexpr const char* kSdkVersion = "2.51.0";

std::string sdk_modules() {
  const char* cache = std::getenv("DSEC_CACHE");
  const char* home = std::getenv("HOME");
  const std::string root =
      cache != nullptr ? cache : std::string(home ? home : "/root") + "/.cache/dsec-vmm";
  return root + "/e2b-sdk-" + kSdkVersion + "/node_modules";
}

// The port the daemon logged for --e2b-listen 127.0.0.1:0; 0 until it did.
uint16_t e2b_port(const std::string& log) {
  constexpr std::string_view kLine = "serving E2B's API on 127.0.0.1:";
  const size_t at = log.find(kLine);
  return at == std::string::npos
             ? 0
             : static_cast<uint16_t>(std::atoi(log.c_str() + at + kLine.size()));
}

TEST(E2bSdk, CreatesUsesFindsAndKillsASandbox) {
  ASSERT_TRUE(std::filesystem::exists(sdk_modules() + "/e2b/package.json"))
      << "E2B's SDK is not in " << sdk_modules() << ": run tools/install-deps all";
  const auto& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  TempDir dir(::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path());
  const std::string tokens = dir.file("tokens");
  std::ofstream(tokens) << "tenant " << kKey << "\n";
  ASSERT_EQ(::chmod(tokens.c_str(), 0600), 0);
  PoolDaemon daemon(dir.path(),
                    {"--ready-timeout", "280", "--tokens", tokens, "--e2b-listen", "127.0.0.1:0"});
  ASSERT_TRUE(daemon.serving(60s)) << daemon.log();
  ASSERT_FALSE(link_into_store(image, daemon.image_dir(), "base").empty());
  const auto registered = daemon.request("PUT", "/images/base", R"({"ready": 1, "max": 2})");
  ASSERT_EQ(registered.status, 200) << registered.body;
  const uint16_t port = e2b_port(daemon.log());
  ASSERT_NE(port, 0) << daemon.log();

  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const ProcessOutput run = run_process(
      {"env", "E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, std::string("E2B_API_KEY=") + kKey,
       "NODE_PATH=" + sdk_modules(), "node", source_path("/tests/e2e/e2b/sdk_smoke.js")},
      280s);
  ASSERT_EQ(run.exit_status, 0) << run.describe() << daemon.log();
  EXPECT_THAT(run.out, HasSubstr("created sb-"));
  EXPECT_THAT(run.out, HasSubstr("read hello from e2b\n"));
  EXPECT_THAT(run.out, HasSubstr("listed a.txt,d\n"));
  EXPECT_THAT(run.out, HasSubstr("exists true false\n"));
  EXPECT_THAT(run.out, HasSubstr("ran \"hi there from 5\\n\" 0\n"));
  EXPECT_THAT(run.out, HasSubstr("failed 3 \"oops\\n\"\n"));
  EXPECT_THAT(run.out, HasSubstr("info base running e2e\n"));
  EXPECT_THAT(run.out, HasSubstr("found 1\n"));
  EXPECT_THAT(run.out, HasSubstr("killed 0\n"));
}

}  // namespace
}  // namespace dsec::test

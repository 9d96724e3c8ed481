// The pool's E2B front (docs/e2b.md) end to end in the test bed: E2B's own SDK (the `e2b`
// npm package, pinned in tools/install-deps) creates a sandbox of a warm image on a real
// pool, writes, reads and lists files in it, runs commands in bash (the default image has
// it), finds it by its metadata, sets its timeout and kills it, through E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY alone; and follows commands' output as they run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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

// A pool with image "base" and the E2B front on a port the kernel picked, its tenant's key
// kKey; scripts of tests/e2e/e2b run against it through the SDK.
class E2bSdk : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(sdk_modules() + "/e2b/package.json"))
        << "E2B's SDK is not in " << sdk_modules() << ": run tools/install-deps all";
    const auto& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
    ASSERT_TRUE(image.failure.empty()) << image.failure;
    const std::string tokens = dir_.file("tokens");
    std::ofstream(tokens) << "tenant " << kKey << "\n";
    ASSERT_EQ(::chmod(tokens.c_str(), 0600), 0);
    daemon_ = std::make_unique<PoolDaemon>(
        dir_.path(),
        std::vector<std::string>{"--ready-timeout", "280", "--tokens", tokens, "--e2b-listen",
                                 "127.0.0.1:0"});
    ASSERT_TRUE(daemon_->serving(60s)) << daemon_->log();
    ASSERT_FALSE(link_into_store(image, daemon_->image_dir(), "base").empty());
    const auto registered = daemon_->request("PUT", "/images/base", R"({"ready": 1, "max": 2})");
    ASSERT_EQ(registered.status, 200) << registered.body;
    port_ = e2b_port(daemon_->log());
    ASSERT_NE(port_, 0) << daemon_->log();
  }

  // Runs tests/e2e/e2b/`script` with node; its output, having checked that it succeeded.
  std::string run_script(const std::string& script) {
    const std::string url = "http://127.0.0.1:" + std::to_string(port_);
    const ProcessOutput run =
        run_process({"env", "E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url,
                     std::string("E2B_API_KEY=") + kKey, "NODE_PATH=" + sdk_modules(), "node",
                     source_path("/tests/e2e/e2b/" + script)},
                    280s);
    EXPECT_EQ(run.exit_status, 0) << run.describe() << daemon_->log();
    return run.out;
  }

  TempDir dir_{::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path()};
  std::unique_ptr<PoolDaemon> daemon_;
  uint16_t port_ = 0;
};

TEST_F(E2bSdk, CreatesUsesFindsAndKillsASandbox) {
  const std::string out = run_script("sdk_smoke.js");
  EXPECT_THAT(out, HasSubstr("created sb-"));
  EXPECT_THAT(out, HasSubstr("read hello from e2b\n"));
  EXPECT_THAT(out, HasSubstr("listed a.txt,d\n"));
  EXPECT_THAT(out, HasSubstr("exists true false\n"));
  EXPECT_THAT(out, HasSubstr("ran \"hi there from 5\\n\" 0\n"));
  EXPECT_THAT(out, HasSubstr("failed 3 \"oops\\n\"\n"));
  EXPECT_THAT(out, HasSubstr("info base running e2e\n"));
  EXPECT_THAT(out, HasSubstr("found 1\n"));
  EXPECT_THAT(out, HasSubstr("killed 0\n"));
}

// Process streams as E2B serves them: events as they happen, not at the process's end.
TEST_F(E2bSdk, StreamsOutputWhileACommandRunsAndKillsABackgroundOne) {
  const std::string out = run_script("sdk_streams.js");
  EXPECT_THAT(out, HasSubstr("first \"line1\\n\" while running true\n"));
  EXPECT_THAT(out, HasSubstr("background \"line1\\nline2\\nline3\\n\" 0\n"));
  EXPECT_THAT(out, HasSubstr("first came before the end by at least 1500 ms true\n"));
  EXPECT_THAT(out, HasSubstr("long \"late\\n\" 0\n"));
  EXPECT_THAT(out, HasSubstr("listed true killed true\n"));
  EXPECT_THAT(out, HasSubstr("sleeper ended -1 false\n"));
  EXPECT_THAT(out, HasSubstr("watched true\n"));
  // The timings, for the record.
  for (size_t at = out.find("figure: "); at != std::string::npos;
       at = out.find("figure: ", at + 1)) {
    std::printf("%s\n", out.substr(at, out.find('\n', at) - at).c_str());
  }
}

}  // namespace
}  // namespace dsec::test

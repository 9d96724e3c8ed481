// PoolClient against the real `dsec-vmm pool`, on what needs no KVM: a daemon with no
// images, an image registered on a stand-in snapshot directory (its files are checked only
// when a clone restores it), and the refusals a client must tell apart (the daemon's
// status and fault_message), a socket nobody serves, and no socket at all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dsec/pool.h"
#include "tests/support/open_fds.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/stand_in_image.h"
#include "tests/support/temp_dir.h"

namespace dsec::sdk {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class SdkPoolClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.serving()) << daemon_.log(); }

  // Image `base` in the daemon's image store: a warm image's two files, `memory` of
  // `memory_bytes`: enough for the daemon to register it; a clone of it would fail to
  // restore.
  void stand_in_snapshot(size_t memory_bytes) const {
    EXPECT_FALSE(test::write_store_image(dir_.file("state/images"), "base", memory_bytes).empty());
  }

  test::TempDir dir_;
  // Unjailed: this daemon restores nothing, and a unit test has no root or cgroup v2.
  test::PoolDaemon daemon_{dir_.path(), {"--no-jail"}};
  PoolClient client_{daemon_.socket()};
};

// The error of a result that must have failed with `code`.
template <typename T>
Error error_of(const Result<T>& result, ErrorCode code) {
  EXPECT_FALSE(result) << "it succeeded";
  if (result) {
    return Error(code, "(it succeeded)");
  }
  EXPECT_EQ(result.error().code(), code) << result.error().to_string();
  return result.error();
}

TEST_F(SdkPoolClientTest, ASnapshotNamedByAPathIsRefusedBeforeAnyRequest) {
  for (const char* path : {"forks/a", "/srv/forks/a", "..", ""}) {
    const auto error =
        error_of(client_.snapshot("sb-0123456789abcdef", path), ErrorCode::kInvalidArgument);
    EXPECT_THAT(error.message(), HasSubstr("an image's name must be")) << path;
  }
}

TEST_F(SdkPoolClientTest, ADaemonWithNoImagesListsNoImageAndNoSandbox) {
  const auto images = client_.images();
  ASSERT_TRUE(images) << images.error().to_string();
  EXPECT_TRUE(images->empty());
  const auto sandboxes = client_.sandboxes();
  ASSERT_TRUE(sandboxes) << sandboxes.error().to_string();
  EXPECT_TRUE(sandboxes->empty());
}

TEST_F(SdkPoolClientTest, AnAcquireOfAnUnknownImageCarriesThePoolsStatusAndMessage) {
  const auto error = error_of(client_.acquire({.image = "nope"}), ErrorCode::kPool);
  EXPECT_EQ(error.http_status(), 404);
  EXPECT_THAT(error.message(), HasSubstr("refused POST /sandboxes (404)"));
  // The daemon's fault_message, which says what to do.
  EXPECT_THAT(error.message(), HasSubstr("no image 'nope' is registered: GET /images"));
}

TEST_F(SdkPoolClientTest, AnUnknownIdIsRefusedWith404ByReleaseKeepaliveAndSandbox) {
  const std::string id = "sb-0123456789abcdef";
  for (const auto& error : {error_of(client_.release(id), ErrorCode::kPool),
                            error_of(client_.keepalive(id), ErrorCode::kPool),
                            error_of(client_.sandbox(id), ErrorCode::kPool),
                            error_of(client_.pause(id), ErrorCode::kPool),
                            error_of(client_.resume(id), ErrorCode::kPool),
                            error_of(client_.snapshot(id, "fork"), ErrorCode::kPool)}) {
    EXPECT_EQ(error.http_status(), 404);
    EXPECT_THAT(error.message(), HasSubstr("no sandbox " + id + ": GET /sandboxes lists them"));
  }
}

TEST_F(SdkPoolClientTest, ARegisteredImageComesBackAndIsListedWithItsLimitsAndSize) {
  stand_in_snapshot(12288);
  const auto image = client_.register_image(
      {.name = "base", .ready = 0, .max = 3, .ttl = 600s, .idle_timeout = 30s});
  ASSERT_TRUE(image) << image.error().to_string();
  EXPECT_EQ(image->name, "base");
  EXPECT_EQ(image->max, 3U);
  EXPECT_EQ(image->ttl, 600s);
  EXPECT_EQ(image->idle_timeout, 30s);

  // A second PUT changes the limits; max left 0 takes the daemon's default, max(ready, 1).
  ASSERT_TRUE(client_.register_image({.name = "base"}));
  const auto images = client_.images();
  ASSERT_TRUE(images) << images.error().to_string();
  ASSERT_EQ(images->size(), 1U);
  const auto& listed = images->front();
  EXPECT_EQ(listed.image.name, "base");
  EXPECT_EQ(listed.image.max, 1U);
  EXPECT_EQ(listed.image.ttl, 0s);
  EXPECT_EQ(listed.guest_memory_bytes, 12288U);
  EXPECT_EQ(listed.starting + listed.ready + listed.in_use + listed.stopping, 0U);
}

TEST_F(SdkPoolClientTest, AnImageNotInTheStoreIsRefusedWith400AndTheDaemonsReason) {
  const auto error = error_of(client_.register_image({.name = "none"}), ErrorCode::kPool);
  EXPECT_EQ(error.http_status(), 400);
  EXPECT_THAT(error.message(), HasSubstr("the image store has no image none"));
  EXPECT_THAT(error.message(),
              HasSubstr("dsec-vmm warm --out " + dir_.file("state/images/none").string()));
  const auto images = client_.images();
  ASSERT_TRUE(images);
  EXPECT_TRUE(images->empty());
}

TEST_F(SdkPoolClientTest, AnAcquireWhoseClonesCannotRestoreIs503AndLeavesNoSandbox) {
  stand_in_snapshot(4096);
  ASSERT_TRUE(client_.register_image({.name = "base"}));
  const auto error = error_of(client_.acquire({.image = "base", .ttl = 60s}), ErrorCode::kPool);
  EXPECT_EQ(error.http_status(), 503) << error.message();
  EXPECT_THAT(error.message(), HasSubstr("no clone of base came up"));
  const auto sandboxes = client_.sandboxes();
  ASSERT_TRUE(sandboxes);
  EXPECT_TRUE(sandboxes->empty());
}

TEST_F(SdkPoolClientTest, NamesThatDoNotFitAPathAreRefusedBeforeAnyRequest) {
  // A client of no daemon: a request sent would fail with kPool, not kInvalidArgument.
  const PoolClient nobody(dir_.file("none.sock"));
  for (const std::string& id :
       std::vector<std::string>{"", "../images", "sb-1 HTTP/1.1\r\nX: y", std::string(65, 'a')}) {
    EXPECT_THAT(error_of(nobody.release(id), ErrorCode::kInvalidArgument).message(),
                HasSubstr("a sandbox's id must be 1 to 64 letters"));
    error_of(nobody.keepalive(id), ErrorCode::kInvalidArgument);
    error_of(nobody.sandbox(id), ErrorCode::kInvalidArgument);
    error_of(nobody.register_image({.name = id}), ErrorCode::kInvalidArgument);
  }
  EXPECT_THAT(error_of(nobody.acquire({.image = "base", .ttl = -1s}), ErrorCode::kInvalidArgument)
                  .message(),
              HasSubstr("AcquireOptions::ttl is negative"));
}

TEST_F(SdkPoolClientTest, NoSocketSaysToStartThePoolDaemon) {
  const auto missing = dir_.file("none.sock").string();
  const auto error = error_of(PoolClient(missing).sandboxes(), ErrorCode::kPool);
  EXPECT_EQ(error.http_status(), 0);
  EXPECT_THAT(error.message(), HasSubstr("no pool socket at " + missing));
  EXPECT_THAT(error.hint(), HasSubstr("dsec-vmm pool --state-dir DIR --socket " + missing));
}

TEST_F(SdkPoolClientTest, ASocketLeftByADaemonThatDiedSaysNobodyServesIt) {
  daemon_.stop(SIGKILL);  // no clean stop: its socket stays
  ASSERT_TRUE(std::filesystem::exists(daemon_.socket()));
  // The kernel tears the daemon's io_uring down after its exit, and with it the last hold
  // on the listening socket: until then a connection is taken and reset.
  auto acquired = client_.acquire({.image = "base"});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!acquired && acquired.error().message().find("reset by peer") != std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    acquired = client_.acquire({.image = "base"});
  }
  const auto error = error_of(acquired, ErrorCode::kPool);
  EXPECT_EQ(error.http_status(), 0);
  EXPECT_THAT(error.message(), HasSubstr("nothing serves the pool socket " + daemon_.socket()));
  EXPECT_THAT(error.hint(), HasSubstr("the pool daemon that made it is gone; start the pool "
                                      "daemon: dsec-vmm pool"));
}

TEST_F(SdkPoolClientTest, CallsLeaveNoDescriptorOpen) {
  const size_t before = test::open_fd_count();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(client_.images());
    ASSERT_FALSE(client_.release("sb-0"));
  }
  EXPECT_EQ(test::open_fd_count(), before);
}

TEST(SdkPoolSandbox, ItsClientTalksToItsVsockSocketAndRefusesTheApiItHasNot) {
  const PoolSandbox sandbox{.id = "sb-1", .image = "base", .vsock_path = "/run/sb-1.vsock"};
  const auto client = sandbox.client();
  EXPECT_EQ(client.endpoints().vsock_path, "/run/sb-1.vsock");
  const auto paused = client.pause();
  ASSERT_FALSE(paused);
  EXPECT_EQ(paused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(paused.error().message(),
              HasSubstr("has no API socket (a pool's sandbox's has none)"));
  EXPECT_FALSE(client.snapshot("/tmp/x"));
}

}  // namespace
}  // namespace dsec::sdk

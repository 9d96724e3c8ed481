// Pause, resume and snapshot through the pool: each "VMM" is a `sh` script (the pool's
// test fixture) whose API socket is served by the real VmApi over a fake backend, so that
// the requests the pool sends and what it makes of the answers are both seen.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "tests/support/fake_vm_backend.h"
#include "tests/support/fake_vsock_endpoint.h"
#include "tests/support/file_text.h"
#include "tests/support/stand_in_image.h"
#include "tests/unit/pool_test_fixture.h"
#include "vmm/api/vm_api.h"
#include "vmm/http/server.h"

namespace dsec::pool {
namespace {

using namespace test_fixture;

// One sandbox's VMM API: a running VM as far as its callers can tell.
struct FakeVmmApi {
  explicit FakeVmmApi(const std::string& socket) {
    backend.current = api::InstanceState::kRunning;
    auto started = http::HttpServer::start(socket, [this](const http::HttpRequest& request) {
      if (request.path == "/snapshot/create") {
        std::this_thread::sleep_for(snapshot_time.load());  // the guest's memory being written
      }
      auto response = endpoints.handle(request);
      if (request.path == "/snapshot/create" && response.status < 300 && backend.created) {
        // As a VMM does: the two files where it was asked to write them (the image's).
        EXPECT_EQ(std::filesystem::path(backend.created->snapshot_path).filename(), "state");
        EXPECT_TRUE(test::write_stand_in_image(
            std::filesystem::path(backend.created->mem_file_path).parent_path(), 6));
      }
      return response;
    });
    EXPECT_TRUE(started) << started.error().message();
    if (started) {
      server = std::move(*started);
    }
  }
  test::FakeVmBackend backend;
  api::VmApi endpoints{backend, "clone"};
  std::atomic<std::chrono::milliseconds> snapshot_time{0ms};
  std::unique_ptr<http::HttpServer> server;  // last: stopped first
};

// Serving "VMMs" whose API sockets are FakeVmmApis, by sandbox id.
class ApiLauncher final : public VmmLauncher {
 public:
  ApiLauncher(test::FakeVsockEndpoint& endpoint,
              std::map<std::string, std::unique_ptr<FakeVmmApi>>& apis)
      : serving_(endpoint), apis_(apis) {}
  Result<LaunchedVmm> launch(const CloneLaunch& clone) override {
    const std::string id = std::filesystem::path(clone.dir).filename();
    apis_[id] = std::make_unique<FakeVmmApi>(clone.files.api);
    return serving_.launch(clone);
  }

 private:
  ServingLauncher serving_;
  std::map<std::string, std::unique_ptr<FakeVmmApi>>& apis_;
};

class PoolControlTest : public PoolTest {
 protected:
  // A pool with health checks every 100 ms, and one sandbox acquired from it: its id.
  std::string acquire_one(PoolOptions options = {.health_interval = 100ms,
                                                 .health_timeout = 200ms,
                                                 .health_failures = 1}) {
    // Not jailed: these fake VMMs write their snapshots where they are asked, as unjailed
    // VMMs do (a jailed one writes into its jail, tests/e2e/pool_test.cpp).
    options.jail_ids.reset();
    pool_ = make_pool(std::make_unique<ApiLauncher>(endpoint_, apis_), options);
    EXPECT_TRUE(pool_->register_image(image(0, 2)));
    auto acquired = acquire_now(*pool_, {.image = "base", .ttl_s = std::nullopt});
    EXPECT_TRUE(acquired) << acquired.error().message;
    return acquired ? (*acquired)["id"].get<std::string>() : "";
  }
  using Call = void (Pool::*)(const Tenant&, const std::string&, Pool::Answer);
  PoolResult<nlohmann::json> call_now(Call call, const std::string& id) {
    auto slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
    ((*pool_).*call)(kOperator, id,
                     [slot](PoolResult<nlohmann::json> answer) { *slot = std::move(answer); });
    return wait_for(slot);
  }
  PoolResult<nlohmann::json> snapshot_now(const std::string& id, const std::string& name) {
    auto slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
    pool_->snapshot(kOperator, id, name,
                    [slot](PoolResult<nlohmann::json> answer) { *slot = std::move(answer); });
    return wait_for(slot);
  }
  std::string vsock_of(const std::string& id) {
    return pool_->sandbox_json(kOperator, id).value_or(nlohmann::json::object())["vsock"];
  }

  test::FakeVsockEndpoint endpoint_;
  std::map<std::string, std::unique_ptr<FakeVmmApi>> apis_;
  std::unique_ptr<Pool> pool_;
};

TEST_F(PoolControlTest, APausedSandboxRefusesExecAndIsNotHealthCheckedUntilResumed) {
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  auto paused = call_now(&Pool::pause, id);
  ASSERT_TRUE(paused) << paused.error().message;
  EXPECT_EQ((*paused)["paused"], true);
  EXPECT_EQ(apis_.at(id)->backend.calls, std::vector<std::string>{"pause"});

  auto refused = exec_now(*pool_, id);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, Failure::kConflict);
  EXPECT_THAT(refused.error().message, HasSubstr("is paused: POST /sandboxes/" + id + "/resume"));

  // A paused guest takes no vsock connection: the health checks must let it be.
  endpoint_.silence(vsock_of(id));
  run_until([] { return false; }, 1s);
  EXPECT_EQ(pool_->counters().hung, 0U);
  ASSERT_TRUE(pool_->sandbox_json(kOperator, id));

  auto resumed = call_now(&Pool::resume, id);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ((*resumed)["paused"], false);
  EXPECT_EQ(apis_.at(id)->backend.calls, (std::vector<std::string>{"pause", "resume"}));
  // Resumed, and still silent: now the checks count.
  EXPECT_TRUE(run_until([&] { return pool_->counters().hung == 1; }));
}

TEST_F(PoolControlTest, ASnapshotPausesTheSandboxWritesItsImageAndResumesIt) {
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  auto made = snapshot_now(id, "fork");
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(*made, (nlohmann::json{{"id", id}, {"name", "fork"}}));
  const auto& backend = apis_.at(id)->backend;
  EXPECT_EQ(backend.calls, (std::vector<std::string>{"pause", "create", "resume"}));
  ASSERT_TRUE(backend.created);
  // The VMM wrote into its own directory, never into the store.
  const std::string sandbox_dir = state_dir() + "/sandboxes/" + id + "/";
  EXPECT_THAT(backend.created->snapshot_path, ::testing::StartsWith(sandbox_dir));
  EXPECT_THAT(backend.created->mem_file_path, ::testing::StartsWith(sandbox_dir));
  EXPECT_EQ(test::file_text(store_dir() + "/fork/state"), test::file_text(image_dir() + "/state"));
  EXPECT_EQ(std::filesystem::status(store_dir() + "/fork/memory").permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_TRUE(pool_->register_image({.name = "fork", .max = 1})) << "a fork the pool serves";
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store_dir()),
                          std::filesystem::directory_iterator()),
            2)
      << "base and fork, no staging directory left";

  auto again = snapshot_now(id, "fork");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, Failure::kConflict);
  EXPECT_THAT(again.error().message, HasSubstr("the image store has fork already"));
}

// A link planted where the snapshot's name lands while it is written is never followed nor
// replaced: the snapshot is refused and nothing is written where the link points.
TEST_F(PoolControlTest, ALinkPlantedAtTheSnapshotsNameIsNeverFollowed) {
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  const std::string outside = dir_.file("outside");
  std::filesystem::create_directory(outside);
  std::filesystem::create_directory_symlink(outside, store_dir() + "/planted");
  auto refused = snapshot_now(id, "planted");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, Failure::kConflict);

  apis_.at(id)->snapshot_time = 500ms;
  auto slot = std::make_shared<std::optional<PoolResult<nlohmann::json>>>();
  pool_->snapshot(kOperator, id, "late",
                  [slot](PoolResult<nlohmann::json> answer) { *slot = std::move(answer); });
  std::filesystem::create_directory_symlink(outside, store_dir() + "/late");
  auto late = wait_for(slot);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().kind, Failure::kConflict);
  EXPECT_TRUE(std::filesystem::is_empty(outside)) << "nothing written through the link";
  EXPECT_TRUE(std::filesystem::is_symlink(store_dir() + "/late")) << "nor the link replaced";
  for (const auto& entry : std::filesystem::directory_iterator(store_dir())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".staging-")) << entry.path();
  }
}

TEST_F(PoolControlTest, ASnapshotPastTheStoresImagesIsRefused) {
  store_limits_.max_images = 2;
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(snapshot_now(id, "one"));
  auto refused = snapshot_now(id, "two");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, Failure::kFull);
  EXPECT_THAT(refused.error().message, HasSubstr("it holds 2 images"));
  EXPECT_THAT(refused.error().message, HasSubstr("--image-store-max-images"));
  EXPECT_FALSE(std::filesystem::exists(store_dir() + "/two"));
  std::filesystem::remove_all(store_dir() + "/one");
  EXPECT_TRUE(snapshot_now(id, "two")) << "room again";
}

// The store's bytes: a snapshot that surely passes them (its guest's memory) is refused
// before its sandbox is paused; one whose files turn out to pass them, once written.
TEST_F(PoolControlTest, ASnapshotPastTheStoresBytesIsRefusedAndLeavesNothing) {
  const uint64_t base = std::filesystem::file_size(image_dir() + "/state") + 6;
  store_limits_.max_bytes = base + 5;  // not the 6 bytes of the fork's memory
  std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  auto early = snapshot_now(id, "fork");
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().kind, Failure::kFull);
  EXPECT_THAT(early.error().message, HasSubstr("--image-store-max-bytes"));
  EXPECT_EQ(apis_.at(id)->backend.calls, std::vector<std::string>{})
      << "refused before the sandbox was paused";

  // Room for the memory, not for the state file the VMM writes too.
  store_limits_.max_bytes = base + 6 + 5;
  pool_.reset();
  id = acquire_one();
  auto late = snapshot_now(id, "fork");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().kind, Failure::kFull);
  EXPECT_EQ(apis_.at(id)->backend.calls, (std::vector<std::string>{"pause", "create", "resume"}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store_dir()),
                          std::filesystem::directory_iterator()),
            1)
      << "only base: no fork, no staging directory";
}

// A paused guest answers no health check: a snapshot that takes long must not make its
// sandbox look hung.
TEST_F(PoolControlTest, ALongSnapshotIsNoHungSandbox) {
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  endpoint_.silence(vsock_of(id));  // as its paused guest would be
  apis_.at(id)->snapshot_time = 1500ms;
  auto made = snapshot_now(id, "fork");
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(pool_->counters().hung, 0U) << "15 checks were due while it was paused";
  EXPECT_TRUE(pool_->sandbox_json(kOperator, id));
}

TEST_F(PoolControlTest, AFailedSnapshotLeavesNoDirectoryAndTheSandboxRunning) {
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(call_now(&Pool::pause, id));
  apis_.at(id)->backend.fail_next = "the disk is full";
  auto failed = snapshot_now(id, "fork");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().kind, Failure::kAgentFailed);
  EXPECT_THAT(failed.error().message, HasSubstr("the disk is full"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(store_dir()),
                          std::filesystem::directory_iterator()),
            1)
      << "only base: no fork, no staging directory";
  EXPECT_EQ(apis_.at(id)->backend.calls, (std::vector<std::string>{"pause", "create"}))
      << "a sandbox paused by its client stays paused";
  EXPECT_EQ(pool_->sandbox_json(kOperator, id).value_or(nlohmann::json::object())["paused"], true);
}

TEST_F(PoolControlTest, ReleasedOrUnknownSandboxesCannotBePaused) {
  const std::string id = acquire_one();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(pool_->release(kOperator, id));
  auto released = call_now(&Pool::pause, id);
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().kind, Failure::kGone);
  auto unknown = call_now(&Pool::resume, "sb-0000000000000000");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, Failure::kNotFound);
}

}  // namespace
}  // namespace dsec::pool

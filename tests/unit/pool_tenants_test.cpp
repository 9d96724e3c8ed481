// Who may call the pool daemon, and what each tenant sees: the tokens file and its
// refusals, the Host header check, the caller checks, and the pool's router with two
// tenants over a real Pool (sh "VMMs"): the second one must find nothing of the first's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "tests/support/file_text.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/pool_test_fixture.h"
#include "vmm/pool/pool_api.h"
#include "vmm/pool/tenant_access.h"

namespace dsec::pool {
namespace {

using namespace test_fixture;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kTokenA = "token-of-tenant-a-0123456789";
constexpr const char* kTokenB = "token-of-tenant-b-0123456789";

TEST(PoolTokens, ParsesTenantsWithTheirQuotasAndSkipsComments) {
  ASSERT_OK_AND_ASSIGN(const auto entries, parse_tokens("# tenants of node 7\n"
                                                        "\n"
                                                        "ops  ops-token-0123456789abcdef operator\n"
                                                        "team-a " +
                                                        std::string(kTokenA) +
                                                        " max_sandboxes=4 max_memory=2G\r\n"
                                                        "   team.b\t" +
                                                        std::string(kTokenB) + " max_memory=512M"));
  ASSERT_EQ(entries.size(), 3U);
  EXPECT_EQ(entries[0], (TokenEntry{.tenant = {.name = "ops", .is_operator = true, .quota = {}},
                                    .token = "ops-token-0123456789abcdef"}));
  EXPECT_EQ(entries[1].tenant.name, "team-a");
  EXPECT_FALSE(entries[1].tenant.is_operator);
  EXPECT_EQ(entries[1].tenant.quota.max_sandboxes, 4U);
  EXPECT_EQ(entries[1].tenant.quota.max_memory_bytes, uint64_t{2} << 30);
  EXPECT_EQ(entries[2].tenant.name, "team.b");
  EXPECT_EQ(entries[2].token, kTokenB);
  EXPECT_EQ(entries[2].tenant.quota.max_sandboxes, std::nullopt);
  EXPECT_EQ(entries[2].tenant.quota.max_memory_bytes, uint64_t{512} << 20);
}

TEST(PoolTokens, RefusesWhatWouldLetTheWrongCallerIn) {
  const auto refused = [](const std::string& text) {
    auto parsed = parse_tokens(text);
    EXPECT_FALSE(parsed) << text;
    return parsed ? std::string() : parsed.error().message();
  };
  EXPECT_THAT(refused("a short\n"), HasSubstr("line 1: the token of a is shorter than 16"));
  EXPECT_THAT(refused("a " + std::string(kTokenA) + "\nb " + kTokenA),
              HasSubstr("line 2: b has the token of a"));
  EXPECT_THAT(refused("a " + std::string(kTokenA) + "\na " + kTokenB),
              HasSubstr("tenant a is named twice"));
  EXPECT_THAT(refused("uid:5 " + std::string(kTokenA)), HasSubstr("a tenant's name"));
  EXPECT_THAT(refused("a " + std::string(kTokenA) + " admin"), HasSubstr("unknown option 'admin'"));
  EXPECT_THAT(refused("a " + std::string(kTokenA) + " max_sandboxes=-1"), HasSubstr("max_sandbox"));
  EXPECT_THAT(refused("a " + std::string(kTokenA) + " max_memory=1T"), HasSubstr("max_memory"));
  EXPECT_THAT(refused("a tok\"en-0123456789abcdef"), HasSubstr("characters a bearer token cannot"));
  EXPECT_THAT(refused("lonely\n"), HasSubstr("a name and a token"));
  EXPECT_THAT(refused("# nobody\n\n"), HasSubstr("names no tenant"));
}

TEST(PoolTokens, TheFileMustBeTheOperatorsAndPrivate) {
  const test::TempDir dir;
  const std::string path = dir.file("tokens");
  std::ofstream(path) << "a " << kTokenA << "\n";
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_OK_AND_ASSIGN(const auto entries, read_tokens_file(path, ::geteuid()));
  EXPECT_EQ(entries.size(), 1U);

  for (const mode_t loose : {0620, 0602, 0604}) {
    ASSERT_EQ(::chmod(path.c_str(), loose), 0);
    const auto refused = read_tokens_file(path, ::geteuid());
    ASSERT_FALSE(refused) << std::oct << loose;
    EXPECT_THAT(refused.error().message(), HasSubstr("chmod 600"));
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);

  const std::string link = dir.file("link");
  std::filesystem::create_symlink(path, link);
  EXPECT_FALSE(read_tokens_file(link, ::geteuid())) << "a symbolic link is refused";

  // Owned by someone who is neither root nor the daemon's user.
  uid_t daemon_uid = ::geteuid() + 1;
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(path.c_str(), 4242, 4242), 0);
    daemon_uid = 0;
  }
  const auto foreign = read_tokens_file(path, daemon_uid);
  ASSERT_FALSE(foreign);
  EXPECT_THAT(foreign.error().message(), HasSubstr("who could change who may use the pool"));
}

TEST(PoolHosts, OnlyTheDaemonsOwnNamesPass) {
  const auto names = default_hosts("10.0.0.5", {"pool.internal"});
  for (const char* good : {"localhost", "LocalHost:8080", "127.0.0.1:80", "[::1]:9000", "10.0.0.5",
                           "10.0.0.5:7000", "pool.internal", "POOL.internal:1"}) {
    EXPECT_TRUE(host_allowed(good, names)) << good;
  }
  for (const char* bad : {"", "evil.example", "localhost.evil.example", "127.0.0.1.nip.io",
                          "10.0.0.6", "pool.internal.evil", ":80", "[::2]:80"}) {
    EXPECT_FALSE(host_allowed(bad, names)) << bad;
  }
  EXPECT_TRUE(host_allowed("[fd00::7]:80", default_hosts("fd00::7", {})));
}

TEST(PoolSecrets, CompareWhole) {
  EXPECT_TRUE(same_secret(kTokenA, kTokenA));
  EXPECT_FALSE(same_secret(kTokenB, kTokenA));
  EXPECT_FALSE(same_secret("token-of-tenant-a", kTokenA)) << "a prefix is not the token";
  EXPECT_FALSE(same_secret(std::string(kTokenA) + "x", kTokenA));
  EXPECT_FALSE(same_secret("", kTokenA));
}

AccessPolicy two_tenants() {
  return {.daemon_uid = 0,
          .allow_uids = {1000},
          .allow_gids = {2000},
          .tokens = {{.tenant = {.name = "a", .is_operator = false, .quota = {}}, .token = kTokenA},
                     {.tenant = {.name = "b",
                                 .is_operator = false,
                                 .quota = {.max_sandboxes = 1, .max_memory_bytes = {}}},
                      .token = kTokenB}},
          .hosts = default_hosts("127.0.0.1", {})};
}

http::HttpRequest unix_request(uid_t uid, gid_t gid) {
  http::HttpRequest request;
  request.caller = {.transport = http::Caller::Transport::kUnix, .uid = uid, .gid = gid, .pid = 9};
  return request;
}

http::HttpRequest tcp_request(std::string_view token, std::string host = "127.0.0.1:8080") {
  http::HttpRequest request;
  request.caller = {.transport = http::Caller::Transport::kTcp, .peer = "192.0.2.7:50000"};
  request.headers.emplace_back("host", std::move(host));
  if (!token.empty()) {
    request.headers.emplace_back("authorization", "Bearer " + std::string(token));
  }
  return request;
}

TEST(PoolTenantAccess, KnowsUnixCallersByUidAndGid) {
  const TenantAccess access(two_tenants());
  const auto root_or = access.identify(unix_request(0, 0));
  ASSERT_TRUE(root_or) << root_or.error().message;
  const Tenant& root = *root_or;
  EXPECT_EQ(root.name, "uid:0");
  EXPECT_TRUE(root.is_operator);
  const auto allowed_or = access.identify(unix_request(1000, 1000));
  ASSERT_TRUE(allowed_or) << allowed_or.error().message;
  const Tenant& allowed = *allowed_or;
  EXPECT_EQ(allowed.name, "uid:1000");
  EXPECT_FALSE(allowed.is_operator);
  const auto by_group_or = access.identify(unix_request(1500, 2000));
  ASSERT_TRUE(by_group_or) << by_group_or.error().message;
  const Tenant& by_group = *by_group_or;
  EXPECT_EQ(by_group.name, "uid:1500");

  const auto stranger = access.identify(unix_request(1001, 1001));
  ASSERT_FALSE(stranger);
  EXPECT_EQ(stranger.error().kind, Failure::kForbidden);
  EXPECT_THAT(stranger.error().message, HasSubstr("uid 1001 (gid 1001) may not use this pool"));

  const auto unknown = access.identify(http::HttpRequest{});
  ASSERT_FALSE(unknown) << "a request whose caller the server did not say";
  EXPECT_EQ(unknown.error().kind, Failure::kForbidden);
}

TEST(PoolTenantAccess, KnowsTcpCallersByTokenOnlyUnderTheirOwnHost) {
  const TenantAccess access(two_tenants());
  const auto b_or = access.identify(tcp_request(kTokenB));
  ASSERT_TRUE(b_or) << b_or.error().message;
  const Tenant& b = *b_or;
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.quota.max_sandboxes, 1U);

  for (const auto& request :
       {tcp_request(""), tcp_request("token-of-tenant-a-012345678"), tcp_request("wrong")}) {
    const auto refused = access.identify(request);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().kind, Failure::kUnauthenticated);
  }
  auto basic = tcp_request("");
  basic.headers.emplace_back("authorization", std::string("Basic ") + kTokenA);
  EXPECT_EQ(access.identify(basic).error().kind, Failure::kUnauthenticated);
  auto lower = tcp_request("");
  lower.headers.emplace_back("authorization", std::string("bearer ") + kTokenA);
  EXPECT_TRUE(access.identify(lower)) << "the scheme is case-insensitive (RFC 7235)";

  const auto rebound = access.identify(tcp_request(kTokenA, "attacker.example"));
  ASSERT_FALSE(rebound);
  EXPECT_EQ(rebound.error().kind, Failure::kForbidden);
  EXPECT_THAT(rebound.error().message, HasSubstr("--allow-host"));
  auto no_host = tcp_request(kTokenA);
  no_host.headers.clear();
  no_host.headers.emplace_back("authorization", std::string("Bearer ") + kTokenA);
  EXPECT_EQ(access.identify(no_host).error().kind, Failure::kForbidden);

  auto unix_with_token = unix_request(1001, 1001);
  unix_with_token.headers.emplace_back("authorization", std::string("Bearer ") + kTokenA);
  EXPECT_FALSE(access.identify(unix_with_token)) << "a token does not help on the socket";
}

// The router over a real pool, with tenant a (a token) holding a sandbox.
class PoolTenantsTest : public PoolTest {
 protected:
  void SetUp() override {
    PoolTest::SetUp();
    pool_ = make_pool(kServes);
    ASSERT_TRUE(pool_->register_image(image(0, 4)));
    router_ = std::make_unique<http::Router>(pool_router(*pool_, access_));
  }

  http::HttpResponse call(http::HttpRequest request, http::Method method, std::string path,
                          std::string body = "") {
    request.method = method;
    request.method_text = std::string(http::method_name(method));
    request.path = std::move(path);
    request.body = std::move(body);
    auto answer = std::make_shared<std::optional<http::HttpResponse>>();
    router_->route(request,
                   [answer](http::HttpResponse response) { *answer = std::move(response); });
    EXPECT_TRUE(run_until([&] { return answer->has_value(); })) << request.path;
    http::HttpResponse none;
    none.status = 0;
    return answer->value_or(none);
  }

  // Acquires a sandbox as `caller`: its id.
  std::string acquire_as(const http::HttpRequest& caller) {
    const auto acquired = call(caller, http::Method::kPost, "/sandboxes", R"({"image": "base"})");
    EXPECT_EQ(acquired.status, 201) << acquired.body;
    return nlohmann::json::parse(acquired.body, nullptr, false).value("id", "");
  }

  TenantAccess access_{two_tenants()};
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<http::Router> router_;
};

TEST_F(PoolTenantsTest, AnotherTenantFindsNoneOfASandboxOnAnyRoute) {
  const std::string id = acquire_as(tcp_request(kTokenA));
  ASSERT_FALSE(id.empty());
  const std::string snapshot_body = R"({"name": "fork"})";

  const std::vector<std::pair<http::Method, std::string>> routes = {
      {http::Method::kGet, ""},           {http::Method::kPost, "/exec"},
      {http::Method::kPut, "/files"},     {http::Method::kGet, "/files"},
      {http::Method::kPost, "/pause"},    {http::Method::kPost, "/resume"},
      {http::Method::kPost, "/snapshot"}, {http::Method::kPost, "/keepalive"},
      {http::Method::kPatch, "/network"}, {http::Method::kPost, "/ports"},
      {http::Method::kDelete, ""}};
  for (const auto& other : {tcp_request(kTokenB), unix_request(1000, 1000), unix_request(0, 0)}) {
    for (const auto& [method, tail] : routes) {
      auto request = other;
      request.headers.emplace_back("x-dsec-path", "/etc/hostname");
      const std::string body = tail == "/exec"       ? R"({"argv": ["true"]})"
                               : tail == "/snapshot" ? snapshot_body
                               : tail == "/network"  ? R"({"mode": "all"})"
                               : tail == "/ports"    ? R"({"guest_port": 80})"
                                                     : "";
      const auto answer = call(request, method, "/sandboxes/" + id + tail, body);
      EXPECT_EQ(answer.status, 404)
          << http::method_name(method) << " " << tail << ": " << answer.body;
      EXPECT_THAT(answer.body, HasSubstr("no sandbox " + id));
    }
    const auto listed = call(other, http::Method::kGet, "/sandboxes");
    EXPECT_EQ(listed.status, 200);
    EXPECT_THAT(listed.body, Not(HasSubstr(id)));
  }
  EXPECT_FALSE(std::filesystem::exists(store_dir() + "/fork")) << "nothing done";
  EXPECT_EQ(pool_->count("base", SandboxState::kInUse), 1U) << "it was neither released nor lost";

  // Its owner still has it, sees it alone in its list, and releases it.
  EXPECT_EQ(call(tcp_request(kTokenA), http::Method::kGet, "/sandboxes/" + id).status, 200);
  const auto mine =
      nlohmann::json::parse(call(tcp_request(kTokenA), http::Method::kGet, "/sandboxes").body);
  ASSERT_EQ(mine["sandboxes"].size(), 1U);
  EXPECT_EQ(mine["sandboxes"][0]["id"], id);
  EXPECT_EQ(call(tcp_request(kTokenA), http::Method::kDelete, "/sandboxes/" + id).status, 204);
  // Once it is gone, its owner hears how, and another tenant still nothing.
  const auto again = call(tcp_request(kTokenA), http::Method::kDelete, "/sandboxes/" + id);
  EXPECT_EQ(again.status, 410);
  EXPECT_THAT(again.body, HasSubstr("it was released"));
  const auto other = call(tcp_request(kTokenB), http::Method::kDelete, "/sandboxes/" + id);
  EXPECT_EQ(other.status, 404);
  EXPECT_THAT(other.body, Not(HasSubstr("released")));
}

// The owner is in the sandbox's record, which a restarted daemon adopts it from.
TEST_F(PoolTenantsTest, TheOwnerIsKeptInTheSandboxesRecord) {
  const std::string id = acquire_as(tcp_request(kTokenA));
  const auto record = parse_record(test::file_text(state_dir() + "/sandboxes/" + id + ".json"));
  ASSERT_TRUE(record) << record.error().message();
  EXPECT_EQ(record->owner, "a");
}

TEST_F(PoolTenantsTest, CallersNotKnownAreRefusedWithNothingDone) {
  const auto wrong = call(tcp_request("not-a-token-of-anyone-0123"), http::Method::kPost,
                          "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_THAT(wrong.headers, ::testing::Contains(std::pair<std::string, std::string>(
                                 "WWW-Authenticate", "Bearer")));
  EXPECT_EQ(call(tcp_request(""), http::Method::kGet, "/sandboxes").status, 401);
  const auto stranger =
      call(unix_request(1001, 1001), http::Method::kPost, "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(stranger.status, 403);
  EXPECT_THAT(stranger.body, HasSubstr("may not use this pool"));
  EXPECT_EQ(call(tcp_request(kTokenA, "evil.example"), http::Method::kGet, "/images").status, 403);
  EXPECT_EQ(
      pool_->count("base", SandboxState::kStarting) + pool_->count("base", SandboxState::kInUse),
      0U)
      << "no clone was started for them";
}

TEST_F(PoolTenantsTest, ImagesAreTheOperatorsAndQuotasAreEachTenants) {
  const std::string spec = R"({"max": 8})";
  for (const auto& tenant : {tcp_request(kTokenA), unix_request(1000, 1000)}) {
    const auto refused = call(tenant, http::Method::kPut, "/images/base", spec);
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_THAT(refused.body, HasSubstr("operator"));
    EXPECT_EQ(call(tenant, http::Method::kGet, "/images").status, 200) << "tenants may list them";
  }
  EXPECT_EQ(call(unix_request(0, 0), http::Method::kPut, "/images/base", spec).status, 200);

  // b may hold one sandbox; a is not limited by b's quota.
  acquire_as(tcp_request(kTokenB));
  const auto second =
      call(tcp_request(kTokenB), http::Method::kPost, "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(second.status, 429);
  EXPECT_THAT(second.body, HasSubstr("tenant b holds 1 sandboxes, its quota of sandboxes"));
  EXPECT_FALSE(acquire_as(tcp_request(kTokenA)).empty());
}

TEST_F(PoolTenantsTest, TheMemoryQuotaCountsTheGuestMemoryOfEverySandboxHeld) {
  auto policy = two_tenants();
  // The image's memory file is 6 bytes ("memory"): room for two, not three.
  policy.tokens[0].tenant.quota.max_memory_bytes = 12;
  access_ = TenantAccess(std::move(policy));
  acquire_as(tcp_request(kTokenA));
  acquire_as(tcp_request(kTokenA));
  const auto third =
      call(tcp_request(kTokenA), http::Method::kPost, "/sandboxes", R"({"image": "base"})");
  EXPECT_EQ(third.status, 429);
  EXPECT_THAT(third.body, HasSubstr("past its quota of guest memory (max_memory)"));
}

TEST(PoolHttpStatus, EachKindHasTheStatusTheApiDocuments) {
  EXPECT_EQ(http_status(Failure::kInvalid), 400);
  EXPECT_EQ(http_status(Failure::kUnauthenticated), 401);
  EXPECT_EQ(http_status(Failure::kForbidden), 403);
  EXPECT_EQ(http_status(Failure::kNotFound), 404);
  EXPECT_EQ(http_status(Failure::kConflict), 409);
  EXPECT_EQ(http_status(Failure::kGone), 410);
  EXPECT_EQ(http_status(Failure::kFull), 429);
  EXPECT_EQ(http_status(Failure::kQuota), 429);
  EXPECT_EQ(http_status(Failure::kAgentFailed), 502);
  EXPECT_EQ(http_status(Failure::kUnavailable), 503);
}

}  // namespace
}  // namespace dsec::pool

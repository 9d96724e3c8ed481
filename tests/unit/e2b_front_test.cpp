// The pool's E2B front (vmm/e2b/e2b_front.h) over a real pool whose sandboxes' agents are the
// guest agent's own code serving on the host (FakeVsockEndpoint): the control plane behind
// X-API-KEY, envd's plane behind each sandbox's access token, one tenant never reaching
// another's sandbox, processes started and streamed, files and the file system, and the
// Connect errors a client sees for what it got wrong.
#include "vmm/e2b/e2b_front.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/agent_on_host.h"
#include "tests/support/fake_vsock_endpoint.h"
#include "tests/unit/pool_test_fixture.h"
#include "vmm/e2b/base64.h"
#include "vmm/e2b/connect_codec.h"
#include "vmm/e2b/e2b_control_plane.h"
#include "vmm/e2b/envd_process_service.h"
#include "vmm/e2b/multipart.h"
#include "vmm/http/body_stream.h"

namespace dsec::e2b {
namespace {

using namespace pool::test_fixture;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kTokenA = "e2b-key-of-tenant-a-0123456789";
constexpr const char* kTokenB = "e2b-key-of-tenant-b-0123456789";

pool::AccessPolicy two_tenants() {
  return {
      .daemon_uid = 0,
      .allow_uids = {},
      .allow_gids = {},
      .tokens = {{.tenant = {.name = "a", .is_operator = false, .quota = {}}, .token = kTokenA},
                 {.tenant = {.name = "b", .is_operator = false, .quota = {}}, .token = kTokenB}},
      .hosts = pool::default_hosts("127.0.0.1", {})};
}

class E2bFront : public pool::test_fixture::PoolTest {
 protected:
  void SetUp() override {
    PoolTest::SetUp();
    pool_ = make_pool(std::make_unique<ServingLauncher>(endpoint_),
                      pool::PoolOptions{.health_interval = 0ms});
    ASSERT_TRUE(pool_->register_image(image(0, 4)));
    router_ = std::make_unique<http::Router>(e2b_router(*pool_, access_, sandboxes_));
  }

  http::HttpResponse call(http::Method method, std::string path, std::string body,
                          std::vector<std::pair<std::string, std::string>> headers,
                          std::string query = "") {
    http::HttpRequest request;
    request.caller = {.transport = http::Caller::Transport::kTcp, .peer = "192.0.2.7:50000"};
    request.headers = std::move(headers);
    request.headers.emplace_back("host", "127.0.0.1:3000");
    request.method = method;
    request.method_text = std::string(http::method_name(method));
    request.path = std::move(path);
    request.query = std::move(query);
    request.body = std::move(body);
    auto answer = std::make_shared<std::optional<http::HttpResponse>>();
    router_->route(request, [answer](http::HttpResponse r) { *answer = std::move(r); });
    EXPECT_TRUE(run_until([&] { return answer->has_value(); })) << request.path;
    http::HttpResponse none;
    none.status = 0;
    http::HttpResponse got = answer->value_or(none);
    if (const auto stream = got.stream) {
      // A streamed answer: its body as the server would send it, until its end.
      EXPECT_TRUE(run_until([&] {
        got.body += stream->take(SIZE_MAX);
        return stream->drained();
      })) << request.path;
      got.stream.reset();
    }
    return got;
  }

  struct Created {
    std::string id;
    std::string token;
  };
  Created create(const char* key, const std::string& body = R"({"templateID": "base"})") {
    const auto r = call(http::Method::kPost, "/sandboxes", body, {{"x-api-key", key}});
    EXPECT_EQ(r.status, 201) << r.body;
    const json created = json::parse(r.body, nullptr, false);
    return {created.value("sandboxID", ""), created.value("envdAccessToken", "")};
  }

  // An envd call to sandbox `s` with its token.
  http::HttpResponse envd(const Created& s, const std::string& path, std::string body,
                          std::string query = "",
                          std::vector<std::pair<std::string, std::string>> extra = {}) {
    extra.emplace_back("e2b-sandbox-id", s.id);
    extra.emplace_back("x-access-token", s.token);
    return call(http::Method::kPost, path, std::move(body), std::move(extra), std::move(query));
  }

  // A server stream's messages, the end-stream's JSON last.
  static std::vector<json> stream_of(const http::HttpResponse& r) {
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "application/connect+json");
    auto envelopes = decode_envelopes(r.body);
    EXPECT_TRUE(envelopes.has_value());
    std::vector<json> messages;
    for (const Envelope& e : envelopes.value_or(std::vector<Envelope>{})) {
      messages.push_back(json::parse(e.payload));
    }
    return messages;
  }

  test::FakeVsockEndpoint endpoint_{test::FakeVsockEndpoint::After::kServeAgent};
  pool::TenantAccess access_{two_tenants()};
  E2bSandboxes sandboxes_;
  std::unique_ptr<pool::Pool> pool_;
  std::unique_ptr<http::Router> router_;
};

TEST_F(E2bFront, ControlPlaneNeedsAnApiKey) {
  const auto none = call(http::Method::kPost, "/sandboxes", R"({"templateID": "base"})", {});
  EXPECT_EQ(none.status, 401);
  EXPECT_THAT(none.body, HasSubstr("X-API-KEY"));
  const auto wrong = call(http::Method::kGet, "/v2/sandboxes", "", {{"x-api-key", "nope"}});
  EXPECT_EQ(wrong.status, 401);
  const auto bad =
      call(http::Method::kPost, "/sandboxes", R"({"timeout": 5})", {{"x-api-key", kTokenA}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("templateID"));
  EXPECT_EQ(json::parse(bad.body)["code"], 400);
}

TEST_F(E2bFront, CreatesGetsListsTimesAndDeletes) {
  const Created s = create(kTokenA, R"({"templateID": "base", "timeout": 60,
                                        "metadata": {"job": "7"}})");
  ASSERT_FALSE(s.id.empty());
  EXPECT_EQ(s.token.size(), 64U);
  const auto got = call(http::Method::kGet, "/sandboxes/" + s.id, "", {{"x-api-key", kTokenA}});
  ASSERT_EQ(got.status, 200) << got.body;
  const json detail = json::parse(got.body);
  EXPECT_EQ(detail["templateID"], "base");
  EXPECT_EQ(detail["state"], "running");
  EXPECT_EQ(detail["metadata"]["job"], "7");
  EXPECT_EQ(detail["envdVersion"], kEnvdVersion);

  const auto listed =
      call(http::Method::kGet, "/v2/sandboxes", "", {{"x-api-key", kTokenA}}, "metadata=job%3D7");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(json::parse(listed.body).size(), 1U);
  const auto filtered =
      call(http::Method::kGet, "/v2/sandboxes", "", {{"x-api-key", kTokenA}}, "metadata=job%3D8");
  EXPECT_EQ(json::parse(filtered.body).size(), 0U);

  EXPECT_EQ(call(http::Method::kPost, "/sandboxes/" + s.id + "/timeout", R"({"timeout": 120})",
                 {{"x-api-key", kTokenA}})
                .status,
            204);
  EXPECT_EQ(call(http::Method::kDelete, "/sandboxes/" + s.id, "", {{"x-api-key", kTokenA}}).status,
            204);
  EXPECT_EQ(call(http::Method::kGet, "/sandboxes/" + s.id, "", {{"x-api-key", kTokenA}}).status,
            404);
  EXPECT_EQ(envd(s, "/process.Process/List", "{}").status, 404) << "its token went with it";
}

TEST_F(E2bFront, AnotherTenantReachesNoneOfASandbox) {
  const Created a = create(kTokenA);
  const Created b = create(kTokenB);
  for (auto method : {http::Method::kGet, http::Method::kDelete}) {
    const auto r = call(method, "/sandboxes/" + a.id, "", {{"x-api-key", kTokenB}});
    EXPECT_EQ(r.status, 404) << r.body;
  }
  EXPECT_EQ(call(http::Method::kPost, "/sandboxes/" + a.id + "/timeout", R"({"timeout": 1})",
                 {{"x-api-key", kTokenB}})
                .status,
            404);
  const auto list_b = call(http::Method::kGet, "/v2/sandboxes", "", {{"x-api-key", kTokenB}});
  EXPECT_THAT(list_b.body, Not(HasSubstr(a.id)));
  // b's token with a's id: none; no token: unauthenticated.
  const auto crossed = envd(Created{a.id, b.token}, "/process.Process/List", "{}");
  EXPECT_EQ(crossed.status, 404);
  EXPECT_EQ(json::parse(crossed.body)["code"], "not_found");
  const auto tokenless =
      call(http::Method::kPost, "/process.Process/List", "{}", {{"e2b-sandbox-id", a.id}});
  EXPECT_EQ(tokenless.status, 401);
  EXPECT_EQ(json::parse(tokenless.body)["code"], "unauthenticated");
  EXPECT_EQ(pool_->count("base", pool::SandboxState::kInUse), 2U);
}

// The process service against the guest agent's whole loop on the host (its kept
// processes; the pool's fake endpoint above serves one session per connection, not them).
class E2bProcessService : public ::testing::Test {
 protected:
  const EnvdMethod& method(std::string_view name) {
    for (const EnvdMethod& m : methods_) {
      if (m.path == "/process.Process/" + std::string(name)) {
        return m;
      }
    }
    ADD_FAILURE() << name;
    return methods_.front();
  }
  // A stream's messages, and how it ended.
  struct Streamed {
    std::vector<json> messages;
    std::optional<ConnectError> error;
  };
  Streamed stream(std::string_view name, agent::AgentClient& client, const json& request) {
    Streamed out;
    out.error = method(name).stream(client, request, caller_, [&](const json& m) {
      out.messages.push_back(m);
      return true;
    });
    return out;
  }
  test::AgentOnHost agent_{"e2b-process"};
  std::vector<EnvdMethod> methods_ = process_methods();
  EnvdCaller caller_{.user = "", .env = {"GREETING=hi"}, .client = nullptr};
};

TEST_F(E2bProcessService, StartStreamsAProcesssOutputAndExit) {
  agent::AgentClient client = agent_.client();
  const json start = {{"process",
                       {{"cmd", "/bin/sh"},
                        {"args", {"-c", "echo $GREETING $X; echo oops >&2; exit 3"}},
                        {"envs", {{"X", "there"}}}}}};
  const Streamed outcome = stream("Start", client, start);
  ASSERT_FALSE(outcome.error) << outcome.error->message;
  const auto& messages = outcome.messages;
  ASSERT_GE(messages.size(), 3U);
  EXPECT_TRUE(messages.front()["event"]["start"]["pid"].is_number());
  std::string out;
  std::string err;
  for (const json& m : messages) {
    if (m["event"].contains("data")) {
      const json& data = m["event"]["data"];
      (data.contains("stdout") ? out : err) +=
          base64_decode(data.value("stdout", data.value("stderr", ""))).value_or("?");
    }
  }
  EXPECT_EQ(out, "hi there\n");
  EXPECT_EQ(err, "oops\n");
  const json& end = messages.back()["event"]["end"];
  EXPECT_EQ(end["exitCode"], 3);
  EXPECT_EQ(end["status"], "exit status 3");
}

TEST_F(E2bProcessService, StartEmitsOutputAsItComesAndAGoneClientLeavesTheProcessRunning) {
  agent::AgentClient client = agent_.client();
  const json start = {
      {"process", {{"cmd", "/bin/sh"}, {"args", {"-c", "echo one; sleep 1; echo two"}}}}};
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<json, Clock::time_point>> seen;
  const auto error = method("Start").stream(client, start, caller_, [&](const json& m) {
    seen.emplace_back(m, Clock::now());
    return true;
  });
  ASSERT_FALSE(error) << error->message;
  ASSERT_GE(seen.size(), 4U);
  EXPECT_TRUE(seen.front().first["event"].contains("start"));
  EXPECT_EQ(base64_decode(seen[1].first["event"]["data"].value("stdout", "")), "one\n");
  // "one" came a second before the end, not with it.
  EXPECT_GE(seen.back().second - seen[1].second, std::chrono::milliseconds(700));
  EXPECT_TRUE(seen.back().first["event"].contains("end"));

  // A client gone after the start: the stream ends canceled, the process runs on.
  const json sleeper = {{"process", {{"cmd", "/bin/sh"}, {"args", {"-c", "echo hi; sleep 30"}}}},
                        {"tag", "kept"}};
  size_t emitted = 0;
  const auto gone = method("Start").stream(client, sleeper, caller_, [&](const json&) {
    return ++emitted < 2;  // the start goes, the first output finds the client gone
  });
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->code, ConnectCode::kCanceled);
  const auto listed = method("List").unary(client, json::object(), caller_);
  ASSERT_TRUE(listed.has_value());
  ASSERT_EQ((*listed)["processes"].size(), 1U);
  EXPECT_EQ((*listed)["processes"][0]["tag"], "kept");
  const json kill = {{"process", {{"tag", "kept"}}}, {"signal", "SIGNAL_SIGKILL"}};
  EXPECT_TRUE(method("SendSignal").unary(client, kill, caller_).has_value());
}

TEST_F(E2bProcessService, InputListConnectAndSignalReachKeptProcesses) {
  agent::AgentClient client = agent_.client();
  const auto start = [&](const char* script, const char* tag) {
    return client.start_process(agent::ProcessStartRequest{.argv = {"/bin/sh", "-c", script},
                                                           .env = {},
                                                           .cwd = "",
                                                           .tag = tag,
                                                           .user = "",
                                                           .stdin_open = true,
                                                           .pty = false,
                                                           .rows = 24,
                                                           .cols = 80});
  };
  auto reader = start("read line; echo got $line; cat; echo closed", "reader");
  ASSERT_TRUE(reader.has_value()) << reader.error().message();
  const auto listed = method("List").unary(client, json::object(), caller_);
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  ASSERT_EQ((*listed)["processes"].size(), 1U);
  EXPECT_EQ((*listed)["processes"][0]["pid"], *reader);
  EXPECT_EQ((*listed)["processes"][0]["tag"], "reader");
  EXPECT_EQ((*listed)["processes"][0]["config"]["cmd"], "/bin/sh");

  const json by_tag = {{"process", {{"tag", "reader"}}},
                       {"input", {{"stdin", base64_encode("x\n")}}}};
  ASSERT_TRUE(method("SendInput").unary(client, by_tag, caller_).has_value());
  ASSERT_TRUE(
      method("CloseStdin").unary(client, {{"process", {{"pid", *reader}}}}, caller_).has_value());
  const Streamed followed = stream("Connect", client, {{"process", {{"pid", *reader}}}});
  ASSERT_FALSE(followed.error) << followed.error->message;
  EXPECT_EQ(followed.messages.back()["event"]["end"]["exitCode"], 0);
  std::string out;
  for (const json& m : followed.messages) {
    if (m["event"].contains("data")) {
      out += base64_decode(m["event"]["data"].value("stdout", "")).value_or("?");
    }
  }
  EXPECT_EQ(out, "got x\nclosed\n");

  auto sleeper = start("sleep 60", "sleeper");
  ASSERT_TRUE(sleeper.has_value()) << sleeper.error().message();
  const json kill = {{"process", {{"pid", *sleeper}}}, {"signal", "SIGNAL_SIGKILL"}};
  ASSERT_TRUE(method("SendSignal").unary(client, kill, caller_).has_value());
  auto exit = client.attach_process(
      *sleeper, [](std::span<const uint8_t>) { return ok(); },
      [](std::span<const uint8_t>) { return ok(); });
  ASSERT_TRUE(exit.has_value()) << exit.error().message();
  EXPECT_EQ(exit->kind, agent::ExitStatus::Kind::kSignaled);
}

TEST_F(E2bProcessService, UnknownPidsAreNotFound) {
  agent::AgentClient client = agent_.client();
  for (const char* name : {"SendSignal", "SendInput", "CloseStdin", "Update"}) {
    const json request = {{"process", {{"pid", 999999}}},
                          {"signal", "SIGNAL_SIGKILL"},
                          {"input", {{"stdin", "aGk="}}},
                          {"pty", {{"size", {{"rows", 10}, {"cols", 10}}}}}};
    const auto r = method(name).unary(client, request, caller_);
    ASSERT_FALSE(r.has_value()) << name;
    EXPECT_EQ(r.error().code, ConnectCode::kNotFound) << name << ": " << r.error().message;
  }
  const Streamed connected = stream("Connect", client, {{"process", {{"tag", "none"}}}});
  ASSERT_TRUE(connected.error.has_value());
  EXPECT_EQ(connected.error->code, ConnectCode::kNotFound);
  const auto bad = method("SendSignal").unary(client, {{"process", {{"pid", 1}}}}, caller_);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ConnectCode::kInvalidArgument);
}

TEST_F(E2bFront, MalformedStreamsAndUnservedMethodsSaySo) {
  const Created s = create(kTokenA);
  const auto cut = stream_of(envd(s, "/process.Process/Start", std::string("\0\0\0\0\x09{}", 7)));
  ASSERT_EQ(cut.size(), 1U);
  EXPECT_EQ(cut[0]["error"]["code"], "invalid_argument");
  const auto watch = envd(s, "/filesystem.Filesystem/CreateWatcher", "{}");
  EXPECT_EQ(watch.status, 501);
  EXPECT_THAT(json::parse(watch.body)["message"].get<std::string>(),
              HasSubstr("filesystem.Filesystem/CreateWatcher"));
}

TEST_F(E2bFront, FilesAndTheFileSystem) {
  const Created s = create(kTokenA);
  const std::string dir = dir_.file("guest");
  const auto made = envd(s, "/filesystem.Filesystem/MakeDir", json{{"path", dir}}.dump());
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_EQ(json::parse(made.body)["entry"]["type"], "FILE_TYPE_DIRECTORY");
  EXPECT_EQ(json::parse(
                envd(s, "/filesystem.Filesystem/MakeDir", json{{"path", dir}}.dump()).body)["code"],
            "already_exists");

  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\nhello\r\n--XyZ--\r\n";
  const auto uploaded = envd(s, "/files", body, "path=" + dir + "/a.txt",
                             {{"content-type", "multipart/form-data; boundary=XyZ"}});
  ASSERT_EQ(uploaded.status, 200) << uploaded.body;
  EXPECT_EQ(json::parse(uploaded.body)[0]["name"], "a.txt");
  const auto read =
      call(http::Method::kGet, "/files", "",
           {{"e2b-sandbox-id", s.id}, {"x-access-token", s.token}}, "path=" + dir + "/a.txt");
  EXPECT_EQ(read.status, 200);
  EXPECT_EQ(read.body, "hello");

  const auto listed = envd(s, "/filesystem.Filesystem/ListDir", json{{"path", dir}}.dump());
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(json::parse(listed.body)["entries"][0]["name"], "a.txt");
  EXPECT_EQ(json::parse(listed.body)["entries"][0]["size"], "5");
  const auto moved = envd(s, "/filesystem.Filesystem/Move",
                          json{{"source", dir + "/a.txt"}, {"destination", dir + "/b.txt"}}.dump());
  EXPECT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(envd(s, "/filesystem.Filesystem/Remove", json{{"path", dir + "/b.txt"}}.dump()).status,
            200);
  const auto gone = envd(s, "/filesystem.Filesystem/Stat", json{{"path", dir + "/b.txt"}}.dump());
  EXPECT_EQ(gone.status, 404) << gone.body;
  const auto missing =
      call(http::Method::kGet, "/files", "",
           {{"e2b-sandbox-id", s.id}, {"x-access-token", s.token}}, "path=" + dir + "/b.txt");
  EXPECT_EQ(missing.status, 404) << missing.body;
  const auto relative = envd(s, "/filesystem.Filesystem/Stat", R"({"path": "x"})");
  EXPECT_EQ(relative.status, 400);
}

TEST(E2bMultipart, RefusesWhatIsCutShort) {
  EXPECT_FALSE(multipart_boundary("multipart/form-data"));
  EXPECT_FALSE(multipart_boundary("text/plain; boundary=x"));
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=\"ab\"").value_or(""), "ab");
  EXPECT_FALSE(parse_multipart("--ab\r\nContent-Disposition: form-data; name=\"file\"", "ab"));
  EXPECT_FALSE(parse_multipart("--ab\r\n\r\nno end", "ab"));
  auto parts = parse_multipart(
      "--ab\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/x\"\r\n\r\n1\r\n--ab--",
      "ab");
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 1U);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "/x");
  EXPECT_EQ((*parts)[0].data, "1");
}

TEST(E2bBase64, RoundTripsAndRefusesStrangers) {
  for (const std::string& text :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    EXPECT_EQ(base64_decode(base64_encode(text)).value_or("?"), text);
  }
  EXPECT_EQ(base64_encode("hi\n"), "aGkK");
  EXPECT_FALSE(base64_decode("a*b="));
  EXPECT_FALSE(base64_decode("a"));
}

}  // namespace
}  // namespace dsec::e2b

namespace dsec::http {
namespace {

TEST(E2bQueryParams, DecodeAndRefuseMalformedEscapes) {
  HttpRequest request;
  request.query = "path=%2Ftmp%2Fa+b.txt&username=root&&flag";
  EXPECT_EQ(request.query_param("path").value_or("?"), "/tmp/a b.txt");
  EXPECT_EQ(request.query_param("username").value_or("?"), "root");
  EXPECT_EQ(request.query_param("flag").value_or("?"), "");
  EXPECT_FALSE(request.query_param("none"));
  request.query = "path=%2";
  EXPECT_FALSE(request.query_params());
  request.query = "path=%zz";
  EXPECT_FALSE(request.query_param("path"));
}

}  // namespace
}  // namespace dsec::http

// The API server on a Unix socket in a temporary directory, over a fake backend: what a
// client sees through the socket (the API client, raw bytes, `dsec-vmm snapshot`), the
// socket file's life, and no fd left behind.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/fake_vm_backend.h"
#include "tests/support/open_fds.h"
#include "tests/support/result_matchers.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/vm_api.h"
#include "vmm/api/vm_control.h"
#include "vmm/http/client.h"
#include "vmm/http/server.h"
#include "vmm/io/unix_socket.h"

namespace dsec::api {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kVmm = dsec::test::binary_path("/vmm/dsec-vmm");

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = http::HttpServer::start(
        socket_, [this](const http::HttpRequest& r) { return api_.handle(r); });
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  // Sends `bytes` on a new connection, shuts the sending side and reads everything back.
  std::string exchange(const std::string& bytes) {
    auto fd = io::connect_unix(socket_);
    EXPECT_TRUE(fd) << fd.error().message();
    if (!fd) {
      return {};
    }
    EXPECT_EQ(::send(fd->get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    ::shutdown(fd->get(), SHUT_WR);
    std::string answer;
    char buffer[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::recv(fd->get(), buffer, sizeof buffer, 0);
      if (n == 0) {
        break;
      }
      if (n > 0) {
        answer.append(buffer, static_cast<size_t>(n));
      } else if (errno == EAGAIN) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        break;
      }
    }
    return answer;
  }

  test::TempDir dir_;
  std::string socket_ = dir_.file("api.sock");
  test::FakeVmBackend backend_;
  VmApi api_{backend_, "test-vm"};
  std::unique_ptr<http::HttpServer> server_;
  http::HttpClient client_ = vmm_api_client(socket_, std::chrono::seconds(10));
};

TEST_F(ApiServerTest, AClientGetsInstanceInfoAndTheSocketIsTheOwnersOnly) {
  ASSERT_OK_AND_ASSIGN(auto info, client_.get("/"));
  EXPECT_EQ(info.at("id"), "test-vm");
  EXPECT_EQ(info.at("state"), "Not started");
  struct stat st {};
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ApiServerTest, PipelinedRequestsOnOneConnectionAreAnsweredInOrder) {
  backend_.current = InstanceState::kRunning;
  const std::string body = R"({"state":"Paused"})";
  const auto answer = exchange(
      "GET / HTTP/1.1\r\n\r\nPATCH /vm HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body + "GET / HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n");
  const auto running = answer.find("\"state\":\"Running\"");
  const auto no_content = answer.find("HTTP/1.1 204 No Content");
  const auto paused = answer.find("\"state\":\"Paused\"");
  const auto not_found = answer.find("HTTP/1.1 400 Bad Request");
  EXPECT_THAT(answer, HasSubstr("Invalid request method and/or path: GET /nope."));
  ASSERT_NE(running, std::string::npos) << answer;
  ASSERT_NE(no_content, std::string::npos) << answer;
  ASSERT_NE(paused, std::string::npos) << answer;
  ASSERT_NE(not_found, std::string::npos) << answer;
  EXPECT_LT(running, no_content);
  EXPECT_LT(no_content, paused);
  EXPECT_LT(paused, not_found);
}

TEST_F(ApiServerTest, AMalformedRequestGets400AndTheServerServesOthers) {
  const auto answer = exchange("NOT HTTP AT ALL\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 400 Bad Request"));
  EXPECT_THAT(answer, HasSubstr("fault_message"));
  ASSERT_OK(client_.get("/"));
}

TEST_F(ApiServerTest, TheClientCarriesTheVmmsFaultMessage) {
  const auto refused = client_.send("PATCH", "/vm", {{"state", "Paused"}});
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(),
              HasSubstr("the VMM refused PATCH /vm (400): there is no VM yet"));
  const auto missing = client_.get("/balloon");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(),
              HasSubstr("(400): Invalid request method and/or path: GET /balloon."));
}

TEST_F(ApiServerTest, ASecondServerOnALiveSocketIsRefused) {
  auto second = http::HttpServer::start(
      socket_, [](const http::HttpRequest&) { return http::HttpResponse::no_content(); });
  ASSERT_FALSE(second);
  EXPECT_THAT(second.error().message(), HasSubstr("another process serves there"));
  ASSERT_OK(client_.get("/"));  // the first one still serves
}

TEST_F(ApiServerTest, StopRemovesTheSocketAndLeavesNoFd) {
  server_->stop();
  EXPECT_FALSE(std::filesystem::exists(socket_));
  const size_t before = test::open_fd_count();
  for (int i = 0; i < 3; ++i) {
    auto server = http::HttpServer::start(
        socket_, [this](const http::HttpRequest& r) { return api_.handle(r); });
    ASSERT_TRUE(server) << server.error().message();
    ASSERT_OK(client_.get("/"));
    auto idle = io::connect_unix(socket_);  // a client still connected at the stop
    ASSERT_TRUE(idle);
  }
  EXPECT_EQ(test::open_fd_count(), before);
  EXPECT_FALSE(std::filesystem::exists(socket_));
  const auto gone = client_.get("/");
  ASSERT_FALSE(gone);
  EXPECT_THAT(gone.error().message(), HasSubstr("no API socket at " + socket_));
}

// An HTTP GET of `path` over TCP to 127.0.0.1:`port`; the whole answer, or "" if the
// connection was refused.
std::string get_over_loopback(uint16_t port, const std::string& path) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string answer;
  char buffer[4096];
  timeval limit{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  for (ssize_t n; (n = ::recv(fd.get(), buffer, sizeof buffer, 0)) > 0;) {
    answer.append(buffer, static_cast<size_t>(n));
  }
  return answer;
}

TEST(ApiServerLoopback, TheApiAnswersOnALoopbackPortTooUntilItStops) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto server, http::HttpServer::bind(dir.file("api.sock")));
  ASSERT_OK_AND_ASSIGN(const uint16_t port, server->listen_on_loopback(0));
  ASSERT_NE(port, 0);
  EXPECT_FALSE(server->listen_on_loopback(0));  // once only
  ASSERT_OK(server->serve([](const http::HttpRequest& r) {
    return http::HttpResponse::json(nlohmann::json{{"path", r.path}});
  }));
  EXPECT_THAT(get_over_loopback(port, "/images"), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(get_over_loopback(port, "/images"), HasSubstr(R"({"path":"/images"})"));
  // The Unix socket still serves beside it.
  http::HttpClient client(dir.file("api.sock"), std::chrono::seconds(10));
  ASSERT_OK_AND_ASSIGN(auto over_unix, client.get("/x"));
  EXPECT_EQ(over_unix.at("path"), "/x");
  server->stop();
  EXPECT_EQ(get_over_loopback(port, "/images"), "");  // nobody listens there any more
}

// A deferred handler answers later, from the loop's thread: its client waits for that
// answer (even after shutting its sending side), and other clients are served meanwhile.
TEST(ApiServerDeferred, AnAnswerGivenLaterReachesItsClientWhileOthersAreServed) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto server, http::HttpServer::bind(dir.file("api.sock")));
  const uint16_t port = server->listen_on_loopback(0).value_or(0);
  http::HttpServer* raw = server.get();
  ASSERT_OK(server->serve_deferred([raw](const http::HttpRequest& r, http::Responder respond) {
    if (r.path != "/slow") {
      respond(http::HttpResponse::json(nlohmann::json{{"path", r.path}}));
      return;
    }
    auto later = raw->loop().add_timer(
        std::chrono::milliseconds(500), [respond = std::move(respond)]() mutable {
          respond(http::HttpResponse::json(nlohmann::json{{"late", 1}}));
        });
    ASSERT_TRUE(later);
  }));
  const auto start = std::chrono::steady_clock::now();
  auto slow = std::async(std::launch::async, [port] { return get_over_loopback(port, "/slow"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  http::HttpClient client(dir.file("api.sock"), std::chrono::seconds(10));
  ASSERT_OK_AND_ASSIGN(auto fast, client.get("/fast"));
  EXPECT_EQ(fast.at("path"), "/fast");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(450))
      << "served while the other request waits";
  const std::string late = slow.get();
  EXPECT_THAT(late, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(late, HasSubstr(R"({"late":1})"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
}

// A request answered later carries its client's presence: marked gone when the client
// closes its connection before the answer (so work done for it alone can stop), never when
// the client waits for and reads its answer.
TEST(ApiServerDeferred, AClientThatLeavesBeforeItsAnswerIsMarkedGoneAndOneThatWaitsIsNot) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto server, http::HttpServer::bind(dir.file("api.sock")));
  http::HttpServer* raw = server.get();
  std::mutex mutex;
  std::vector<std::shared_ptr<http::ClientPresence>> clients;
  std::atomic<int> stopped{0};
  ASSERT_OK(server->serve_deferred([&, raw](const http::HttpRequest& r, http::Responder respond) {
    r.client->on_gone([&stopped] { ++stopped; });
    {
      const std::lock_guard lock(mutex);
      clients.push_back(r.client);
    }
    ASSERT_TRUE(
        raw->loop().add_timer(std::chrono::milliseconds(r.path == "/slow" ? 3000 : 300),
                              [respond = std::move(respond)]() mutable {
                                respond(http::HttpResponse::json(nlohmann::json{{"late", 1}}));
                              }));
  }));
  const auto presence = [&](size_t i) {
    const std::lock_guard lock(mutex);
    return i < clients.size() ? clients[i] : nullptr;
  };
  // One that waits: answered, never gone.
  http::HttpClient waiting(dir.file("api.sock"), std::chrono::seconds(10));
  ASSERT_OK_AND_ASSIGN(auto answered, waiting.get("/fast"));
  EXPECT_EQ(answered.at("late"), 1);
  ASSERT_NE(presence(0), nullptr);
  EXPECT_FALSE(presence(0)->gone());
  // One that leaves: gone at once, its stop run once, long before its answer would come.
  {
    auto fd = io::connect_unix(dir.file("api.sock"));
    ASSERT_TRUE(fd) << fd.error().message();
    const std::string request = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::send(fd->get(), request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (presence(1) == nullptr && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_NE(presence(1), nullptr);
    EXPECT_FALSE(presence(1)->gone()) << "still connected";
  }  // closed
  const auto left = std::chrono::steady_clock::now();
  while (!presence(1)->gone() &&
         std::chrono::steady_clock::now() - left < std::chrono::seconds(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(presence(1)->gone());
  EXPECT_LT(std::chrono::steady_clock::now() - left, std::chrono::milliseconds(2000));
  EXPECT_EQ(stopped.load(), 1);
  server->stop();
}

// Each request carries who connected, as the kernel said at accept: on the socket the
// peer's uid, gid and pid (SO_PEERCRED), over TCP its address; never from the bytes.
TEST(ApiServerCallers, EachRequestCarriesWhoConnected) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto server, http::HttpServer::bind(dir.file("api.sock")));
  ASSERT_OK_AND_ASSIGN(const uint16_t port, server->listen_on_tcp("127.0.0.1", 0));
  ASSERT_OK(server->serve([](const http::HttpRequest& r) {
    const bool unix_socket = r.caller.transport == http::Caller::Transport::kUnix;
    return http::HttpResponse::json(nlohmann::json{{"unix", unix_socket},
                                                   {"uid", r.caller.uid},
                                                   {"gid", r.caller.gid},
                                                   {"pid", r.caller.pid},
                                                   {"peer", r.caller.peer}});
  }));
  http::HttpClient client(dir.file("api.sock"), std::chrono::seconds(10));
  ASSERT_OK_AND_ASSIGN(auto over_unix, client.get("/who"));
  EXPECT_EQ(over_unix.at("unix"), true);
  EXPECT_EQ(over_unix.at("uid"), ::geteuid());
  EXPECT_EQ(over_unix.at("gid"), ::getegid());
  EXPECT_EQ(over_unix.at("pid"), ::getpid());
  const std::string over_tcp = get_over_loopback(port, "/who");
  EXPECT_THAT(over_tcp, HasSubstr(R"("unix":false)"));
  EXPECT_THAT(over_tcp, HasSubstr(R"("peer":"127.0.0.1:)"));
}

TEST(ApiServerCallers, TheSocketModeChangesOnlyOnTheServersOwnFile) {
  test::TempDir dir;
  const std::string path = dir.file("api.sock");
  ASSERT_OK_AND_ASSIGN(auto server, http::HttpServer::bind(path));
  ASSERT_OK(server->set_socket_mode(0666));
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0666U);
  // Swapped for a symbolic link to another file: that file keeps its mode.
  const std::string other = dir.file("other");
  std::ofstream(other) << "x";
  ASSERT_EQ(::chmod(other.c_str(), 0600), 0);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink(other.c_str(), path.c_str()), 0);
  EXPECT_FALSE(server->set_socket_mode(0666));
  ASSERT_EQ(::stat(other.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600U);
}

TEST(ApiServerLoopback, ANonNumericAddressIsRefused) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto server, http::HttpServer::bind(dir.file("api.sock")));
  const auto refused = server->listen_on_tcp("localhost", 0);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr("not a numeric IPv4 or IPv6 address"));
}

TEST(ApiServerLoopback, APortInUseIsRefusedSayingSo) {
  test::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto first, http::HttpServer::bind(dir.file("a.sock")));
  ASSERT_OK_AND_ASSIGN(const uint16_t port, first->listen_on_loopback(0));
  ASSERT_OK_AND_ASSIGN(auto second, http::HttpServer::bind(dir.file("b.sock")));
  const auto taken = second->listen_on_loopback(port);
  ASSERT_FALSE(taken);
  EXPECT_THAT(taken.error().message(), HasSubstr("choose another port"));
}

TEST_F(ApiServerTest, OneClientOverTheLimitIsClosedAndTheOthersAreServed) {
  std::vector<UniqueFd> idle;
  for (size_t i = 0; i < http::HttpServer::kMaxConnections; ++i) {
    auto fd = io::connect_unix(socket_);
    ASSERT_TRUE(fd) << fd.error().message();
    idle.push_back(std::move(*fd));
  }
  auto extra = io::connect_unix(socket_);
  ASSERT_TRUE(extra);
  pollfd p{.fd = extra->get(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the server closes the one over the limit";
  char byte = 0;
  EXPECT_EQ(::recv(extra->get(), &byte, 1, 0), 0);
  // One idle client goes: there is room for a new one.
  idle.pop_back();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Result<nlohmann::json> info = fail("not asked yet");
  while (!info && std::chrono::steady_clock::now() < deadline) {
    info = client_.get("/");
    if (!info) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->at("id"), "test-vm");
}

TEST(ApiServerSocket, AStaleSocketIsReplacedAndAnyOtherFileRefused) {
  test::TempDir dir;
  const auto path = dir.file("api.sock");
  {
    auto stale = io::listen_unix(path);  // bound, then closed: nobody serves it
    ASSERT_TRUE(stale);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  auto server = http::HttpServer::start(
      path, [](const http::HttpRequest&) { return http::HttpResponse::no_content(); });
  ASSERT_TRUE(server) << server.error().message();
  server->reset();

  const auto file = dir.file("plain");
  std::ofstream(file) << "not a socket";
  auto refused = http::HttpServer::start(
      file, [](const http::HttpRequest&) { return http::HttpResponse::no_content(); });
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr("exists and is not a socket"));
  EXPECT_TRUE(std::filesystem::exists(file)) << "nothing was removed";
}

TEST_F(ApiServerTest, SnapshotCreatePausesWritesTheSnapshotDirectoryAndResumes) {
  backend_.current = InstanceState::kRunning;
  const auto out = dir_.path() / "snap";
  const auto result = test::run_process(
      {kVmm, "snapshot", "create", "--api-sock", socket_, "--out", out.string(), "--resume"},
      std::chrono::seconds(30));
  ASSERT_EQ(result.exit_status, 0) << result.describe();
  EXPECT_THAT(backend_.calls, ::testing::ElementsAre("pause", "create", "resume"));
  ASSERT_TRUE(backend_.created);
  // The layout `dsec-vmm warm` writes and `dsec-vmm restore` reads.
  EXPECT_EQ(backend_.created->snapshot_path, (out / "state").string());
  EXPECT_EQ(backend_.created->mem_file_path, (out / "memory").string());
  EXPECT_TRUE(std::filesystem::is_directory(out));
  EXPECT_THAT(result.out, HasSubstr(out.string()));
}

TEST_F(ApiServerTest, SnapshotCreateOfAPausedVmLeavesItPaused) {
  backend_.current = InstanceState::kPaused;
  const auto result = test::run_process(
      {kVmm, "snapshot", "create", "--api-sock", socket_, "--out", dir_.file("s")},
      std::chrono::seconds(30));
  ASSERT_EQ(result.exit_status, 0) << result.describe();
  EXPECT_THAT(backend_.calls, ::testing::ElementsAre("create"));
  EXPECT_EQ(backend_.current, InstanceState::kPaused);
}

TEST_F(ApiServerTest, SnapshotPauseAndResumeAndTheirErrors) {
  backend_.current = InstanceState::kRunning;
  auto paused = test::run_process({kVmm, "snapshot", "pause", "--api-sock", socket_},
                                  std::chrono::seconds(30));
  ASSERT_EQ(paused.exit_status, 0) << paused.describe();
  EXPECT_EQ(backend_.current, InstanceState::kPaused);
  auto resumed = test::run_process({kVmm, "snapshot", "resume", "--api-sock", socket_},
                                   std::chrono::seconds(30));
  ASSERT_EQ(resumed.exit_status, 0) << resumed.describe();
  EXPECT_EQ(backend_.current, InstanceState::kRunning);

  backend_.fail_next = "the VM has ended";
  auto refused = test::run_process({kVmm, "snapshot", "pause", "--api-sock", socket_},
                                   std::chrono::seconds(30));
  EXPECT_EQ(refused.exit_status, 1) << refused.describe();
  EXPECT_THAT(refused.err, HasSubstr("the VMM refused PATCH /vm (400): the VM has ended"));

  auto missing =
      test::run_process({kVmm, "snapshot", "pause", "--api-sock", dir_.file("nothing.sock")},
                        std::chrono::seconds(30));
  EXPECT_EQ(missing.exit_status, 1) << missing.describe();
  EXPECT_THAT(missing.err, HasSubstr("no API socket at " + dir_.file("nothing.sock").string()));
  EXPECT_THAT(missing.err, HasSubstr("start a VMM with --api-sock"));
}

TEST_F(ApiServerTest, SnapshotCreateWithoutAVmSaysWhy) {
  const auto result = test::run_process(
      {kVmm, "snapshot", "create", "--api-sock", socket_, "--out", dir_.file("s")},
      std::chrono::seconds(30));
  EXPECT_EQ(result.exit_status, 1) << result.describe();
  EXPECT_THAT(result.err, HasSubstr("has no VM to snapshot (state: Not started)"));
  EXPECT_TRUE(backend_.calls.empty());
}

}  // namespace
}  // namespace dsec::api
